"""A local Ray for the whole test session: started once (or reused), workers warmed up.

Every test that uses it is marked ``ray`` (``-m "not ray"`` skips them).
"""

from __future__ import annotations

import os
import time

import pytest


def _warm_up(workers: int, timeout: float = 120.0) -> None:
    """Wait until ``workers`` worker processes have imported torch and distcheck, so that
    tests measure checks, not Ray's worker start-up (~3 s each)."""
    import ray

    @ray.remote(num_cpus=1)
    def hello() -> int:
        import torch  # noqa: F401

        import distcheck.plan.units  # noqa: F401

        time.sleep(0.2)  # long enough that the tasks spread over every worker
        return os.getpid()

    seen: set[int] = set()
    deadline = time.monotonic() + timeout
    while len(seen) < workers and time.monotonic() < deadline:
        seen.update(ray.get([hello.remote() for _ in range(2 * workers)]))


@pytest.fixture(scope="session")
def ray_cluster():
    """Ray, initialized by distcheck (a local Ray on every core unless DISTCHECK_RAY_ADDRESS
    names a cluster); shut down at the end if this session started it."""
    import ray

    from distcheck.executors.ray_executor import cluster_cpus, ensure_ray

    started = not ray.is_initialized()
    ensure_ray()
    _warm_up(cluster_cpus())
    yield ray
    if started:
        ray.shutdown()


def pytest_collection_modifyitems(items) -> None:
    for item in items:
        if "ray_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.ray)
