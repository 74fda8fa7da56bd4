"""JAX's 64-bit mode reaches Ray workers as the engine's state: a script that turns x64 on and
checks a JAX function on Ray gets torch's verdict, where its workers used to compute in float32.

The script runs in a process of its own with a Ray of its own (fresh workers, as a user's
script gets). Its checked function is defined here, in a module that leaves x64 alone, so a
worker that imports it to unpickle the function learns the mode only from distcheck.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402

pytestmark = pytest.mark.ray

SCRIPT = """
import json, sys
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np, jax.numpy as jnp, torch
import distcheck
from tests.executors.test_jax_x64_ray import sin_times

x, y = np.linspace(0.1, 0.9, 6).reshape(2, 3), np.linspace(1.0, 2.0, 6).reshape(2, 3)
verdicts = {"torch": torch.autograd.gradcheck(
    lambda a, b: a.sin() * b, (torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True))
)}
for executor in ("serial", "ray"):
    for fast_mode in (False, True):
        try:
            verdict = distcheck.gradcheck(sin_times, (jnp.asarray(x), jnp.asarray(y)), fast_mode=fast_mode,
                                          executor=executor)
        except distcheck.GradcheckError as e:
            verdict = str(e).splitlines()[0]
        verdicts[f"{executor} fast={fast_mode}"] = verdict
json.dump(verdicts, sys.stdout)
"""


def sin_times(x, y):
    return jnp.sin(x) * y


def test_a_script_with_x64_on_gets_torch_s_verdict_on_ray(tmp_path):
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k not in ("DISTCHECK_RAY_ADDRESS", "RAY_ADDRESS", "JAX_ENABLE_X64")}
    env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    verdicts = json.loads(done.stdout.strip().splitlines()[-1])
    assert verdicts == {
        "torch": True,
        "serial fast=False": True,
        "serial fast=True": True,
        "ray fast=False": True,
        "ray fast=True": True,
    }
