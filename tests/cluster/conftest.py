"""The local S3 server (the nightly writes its reports there)."""

from tests.storage.conftest import s3, s3_server  # noqa: F401
