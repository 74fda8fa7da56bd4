"""The local S3 server of tests/storage (one per session, a new bucket per test)."""

from tests.storage.conftest import s3, s3_server  # noqa: F401
