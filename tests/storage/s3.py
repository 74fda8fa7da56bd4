"""A local S3 server for tests: moto's server mode on 127.0.0.1 at a free port, with fake
credentials that the tests give the S3 clients (s3fs, boto3) through their usual environment.

    with S3Server() as server:                   # or the `s3` fixture (tests/storage/conftest.py)
        os.environ.update(server.environment)    # endpoint and credentials, as a store's user sets them
        bucket = server.bucket()                 # a new, empty bucket: bucket.url is "s3://NAME"

A test package uses the fixtures by importing them in its conftest.py:
``from tests.storage.conftest import s3, s3_server  # noqa: F401``.
"""

from __future__ import annotations

import itertools
import logging
import os
from dataclasses import dataclass

ACCESS_KEY = "DISTCHECKTESTACCESSKEY"
SECRET_KEY = "distcheck-test-secret-never-to-be-written"
REGION = "us-east-1"
_names = itertools.count(1)


@dataclass(frozen=True)
class Bucket:
    """A bucket of the local server: ``url`` is ``s3://NAME``."""

    name: str
    server: S3Server

    @property
    def url(self) -> str:
        return f"s3://{self.name}"

    def objects(self) -> dict[str, bytes]:
        """Every object in the bucket, by key."""
        client = self.server.client()
        keys = [
            item["Key"]
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=self.name)
            for item in page.get("Contents", [])
        ]
        return {key: client.get_object(Bucket=self.name, Key=key)["Body"].read() for key in keys}


class S3Server:
    """moto's S3 (and every other AWS service it mocks) on 127.0.0.1, started and stopped."""

    def __init__(self):
        from moto.server import ThreadedMotoServer

        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.endpoint: str | None = None

    def start(self) -> S3Server:
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # not a line per request
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def environment(self) -> dict[str, str]:
        """What an S3 client reads to reach this server: endpoint, fake credentials, region; no
        config file of this machine's user, no cloud metadata service."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def client(self):
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )

    def bucket(self) -> Bucket:
        """A new, empty bucket."""
        name = f"distcheck-test-{os.getpid()}-{next(_names)}"
        self.client().create_bucket(Bucket=name)
        return Bucket(name, self)
