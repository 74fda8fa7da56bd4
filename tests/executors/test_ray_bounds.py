"""What a check on Ray may hold: a Jacobian budget refused before Ray starts (the API's
equivalent of ``--max-jacobian-mb``), and a local Ray's spilled objects in a folder of
distcheck's, removed when it stops Ray. Each runs in a process of its own: the test session's
Ray must not be the one looked at."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from distcheck.executors.ray_settings import JacobianBudgetError, check_jacobian_budget, jacobian_bytes
from distcheck.plan.units.numerical import NumericalColumns
from distcheck.plan.units.slots import OutputSlot

ROOT = Path(__file__).resolve().parents[2]


def _python(script: str, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    for variable in ("DISTCHECK_RAY_ADDRESS", "RAY_ADDRESS", "DISTCHECK_RAY_SESSION"):
        environment.pop(variable, None)
    code = textwrap.dedent(script)
    return subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=300)


def test_jacobian_bytes_count_the_numerical_and_analytical_jacobians():
    def columns(start: int, stop: int, *outputs) -> NumericalColumns:
        return NumericalColumns("f", 0, start, stop, 1e-6, (100,), False, outputs)

    units = [columns(0, 60, OutputSlot(30, "float64"), None), columns(60, 100, OutputSlot(30, "float64"), None)]
    assert jacobian_bytes(units) == 2 * 100 * 30 * 8
    check_jacobian_budget(units, 2 * 100 * 30 * 8)
    with pytest.raises(JacobianBudgetError, match=r"would take 0.0458 MB, over the Ray executor's budget of 0.0229 MB"):
        check_jacobian_budget(units, 24000)
    assert jacobian_bytes([]) == 0


@pytest.mark.slow
def test_a_check_over_the_budget_is_refused_before_ray_starts():
    done = _python(
        """
        import ray, torch, distcheck
        from distcheck.executors.ray_settings import JacobianBudgetError

        x = torch.randn(20, 20, dtype=torch.float64, requires_grad=True)  # Jacobians: 2 x 400 x 400 doubles
        try:
            distcheck.gradcheck(torch.sinh, (x,), executor="ray")
        except JacobianBudgetError as e:
            print("refused:", e)
        print("ray started:", ray.is_initialized())
        assert distcheck.gradcheck(torch.sinh, (x,), executor="serial")  # in-process: no budget
        """,
        DISTCHECK_MAX_JACOBIAN_MB="1",
        DISTCHECK_LOCAL_BELOW="0",  # every check to Ray, however small
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "refused: this check's numerical and analytical Jacobians would take 2.44 MB, over the Ray executor's " in (
        done.stdout
    )
    assert "budget of 1 MB" in done.stdout and "ray started: False" in done.stdout


@pytest.mark.slow
@pytest.mark.ray
def test_a_local_rays_spilled_objects_go_to_a_folder_removed_when_it_stops():
    from ray._private.utils import estimate_available_memory  # what Ray sizes its object store from

    store = 150e6  # bytes: a small object store, overflowed by 20 objects of 32 MiB
    done = _python(
        """
        import os
        import numpy as np
        import ray
        from distcheck.executors import ray_settings
        from distcheck.executors.ray_executor import ensure_ray

        ensure_ray(warm=False)
        (folder,) = ray_settings._spill_folders
        refs = [ray.put(np.ones(2**22)) for _ in range(20)]
        spilled = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(folder) for f in files)
        print("spilled MB:", spilled // 2**20)
        ray_settings.stop_ray()
        print("left:", os.path.exists(folder), ray.is_initialized())
        """,
        RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION=str(store / estimate_available_memory()),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    spilled = int(done.stdout.split("spilled MB:")[1].split()[0])
    assert spilled >= 32 and "left: False False" in done.stdout, done.stdout


def test_the_budget_defaults_to_a_quarter_of_the_ram(monkeypatch):
    from distcheck.executors.ray_settings import default_max_jacobian_bytes

    monkeypatch.delenv("DISTCHECK_MAX_JACOBIAN_MB", raising=False)
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert default_max_jacobian_bytes() == ram / 4
    monkeypatch.setenv("DISTCHECK_MAX_JACOBIAN_MB", "10")
    assert default_max_jacobian_bytes() == 10 * 2**20


def test_address_auto_is_rays_own_lookup(monkeypatch, capsys):
    """``auto`` is handed to Ray as it is (Ray joins the cluster `ray start` began here, else any
    Ray here, another driver's ``ray.init()`` session included), and the help says so."""
    from distcheck.cli import main
    from distcheck.executors import ray_start

    joined = {}
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setattr(ray_start.ray, "init", lambda **kwargs: joined.update(kwargs))
    ray_start._init("auto", None)
    assert joined["address"] == "auto" and "object_spilling_directory" not in joined  # a cluster's own spilling
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "another process's ray.init() session included" in " ".join(capsys.readouterr().out.split())
