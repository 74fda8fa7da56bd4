"""The session's Ray (shared with the executor tests)."""

from tests.executors.conftest import ray_cluster  # noqa: F401
