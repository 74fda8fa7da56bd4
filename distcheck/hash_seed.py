"""One string-hash seed for every process of a run.

Some sample functions iterate over sets of strings (op_db's meshgrid samples iterate
``{'xy', 'ij'}``), so with Python's per-process hash randomization the same sample index names
different numbers in different processes. Every process that builds cases must therefore run
with the same ``PYTHONHASHSEED``: the command line re-executes itself with it, and Ray workers
get it in their environment. (A mismatch that slips through is caught by the fingerprint
check and reported as an error, never checked silently.)
"""

from __future__ import annotations

import os
import sys

HASH_SEED = "0"
ENV = {"PYTHONHASHSEED": HASH_SEED}


def is_fixed() -> bool:
    """Whether this process runs with the run's hash seed."""
    return os.environ.get("PYTHONHASHSEED") == HASH_SEED


def reexec(argv: list[str]) -> None:
    """Replace this process by ``python *argv`` with the run's hash seed (does not return)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *argv], {**os.environ, **ENV})


def task_runtime_env(job_env: dict) -> dict | None:
    """The runtime environment Ray tasks that build cases need, given the job's: None if the
    job's workers already have the seed (they are then shared with other tasks)."""
    if job_env.get("env_vars", {}).get("PYTHONHASHSEED") == HASH_SEED:
        return None
    return {"env_vars": dict(ENV)}
