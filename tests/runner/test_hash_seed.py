"""Every process of a run hashes strings alike (samples may iterate over sets of strings)."""

from __future__ import annotations

import subprocess
import sys

from distcheck import hash_seed


def test_reexec_fixes_the_seed():
    code = (
        "import os; from distcheck import hash_seed; "
        "hash_seed.is_fixed() or hash_seed.reexec(['-c', \"import os; print(os.environ['PYTHONHASHSEED'])\"])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": "7"}
    )
    assert out.stdout.strip() == hash_seed.HASH_SEED


def test_task_environment_only_when_the_job_lacks_it():
    assert hash_seed.task_runtime_env({}) == {"env_vars": {"PYTHONHASHSEED": "0"}}
    assert hash_seed.task_runtime_env({"env_vars": {"PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1"}}) is None
