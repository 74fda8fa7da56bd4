"""The local S3 server (tests/storage/s3.py): one per test session, a new bucket per test."""

from __future__ import annotations

import pytest

from tests.storage.s3 import Bucket, S3Server


@pytest.fixture(scope="session")
def s3_server():
    with S3Server() as server:
        yield server


@pytest.fixture
def s3(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> Bucket:
    """A new, empty bucket of the local S3 server, with this process's environment (inherited
    by the processes a test starts) set to reach it: endpoint and fake credentials."""
    import s3fs

    for name, value in s3_server.environment.items():
        monkeypatch.setenv(name, value)
    s3fs.S3FileSystem.clear_instance_cache()  # a filesystem made for another test's environment
    yield s3_server.bucket()
    s3fs.S3FileSystem.clear_instance_cache()
