"""GPU runs without a GPU: the device checks, runner counts and out-of-memory figures with a
fake device, and runners holding GPU shares on a local Ray with logical GPUs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import torch

from distcheck import cli
from distcheck import gpus as gpus_module
from distcheck.gpus import check_gpus_per_runner, check_local, out_of_memory, placement, ray_runners
from distcheck.runner import RunOptions, run_suite
from distcheck.suites.base import Selection, UsageError
from tests.runner.gpu_suite import GpuSuite

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class FakeCuda:
    """A machine with ``count`` GPUs of 80 GB, 1 GB allocated, 2 GB reserved."""

    def __init__(self, count: int = 1):
        self.count, self.freed = count, 0

    def is_available(self) -> bool:
        return self.count > 0

    def device_count(self) -> int:
        return self.count

    def describe(self) -> str:
        return "a fake torch"

    def memory(self, device: str) -> tuple[int, int, int]:
        return 2**30, 2 * 2**30, 80 * 2**30

    def free_cache(self) -> None:
        self.freed += 1


@pytest.fixture
def fake_cuda(monkeypatch):
    fake = FakeCuda()
    monkeypatch.setattr(gpus_module, "cuda", fake)
    return fake


def test_a_machine_without_cuda_is_one_line_before_anything_runs(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    out = tmp_path / "run"
    code = cli.main(["run", "--serial", "--device", "cuda", "--ops", "sinh", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    why = f"this machine has no CUDA device ({gpus_module.cuda.describe()}); use --device cpu"
    assert err == [f"distcheck: error: --device cuda: {why}"]
    assert not out.exists()


def test_device_index_beyond_the_machine_and_on_ray(fake_cuda):
    check_local("cuda:0")
    with pytest.raises(UsageError, match=r"has 1 CUDA device\(s\)"):
        check_local("cuda:1")
    with pytest.raises(UsageError, match="on Ray use --device cuda"):
        ray_runners("cuda:0", 8, 2, 1)


def test_runners_on_gpus_fractional_packing():
    assert ray_runners("cuda", 16, 2, 1.0) == 2
    assert ray_runners("cuda", 16, 2, 0.25) == 8
    assert ray_runners("cuda", 4, 2, 0.25) == 4  # a runner also takes a CPU
    assert ray_runners("cuda", 16, 3, 0.3) == 10
    assert placement(8, 2, 0.25) == "8 runner(s) on 2 GPU(s) (0.25 GPU each)"
    with pytest.raises(UsageError, match="the Ray cluster has no GPU"):
        ray_runners("cuda", 16, 0, 1)
    with pytest.raises(UsageError, match=r"has 0.5 GPU\(s\)"):
        ray_runners("cuda", 16, 0.5, 1)
    check_gpus_per_runner(0.25)
    check_gpus_per_runner(2)
    with pytest.raises(UsageError, match="--gpus-per-runner 1.5"):
        check_gpus_per_runner(1.5)


def test_out_of_memory_is_an_error_with_the_figures_and_the_cache_freed(fake_cuda):
    assert (
        out_of_memory("cuda")
        .describe()
        .startswith("CUDA out of memory (allocated 1,024 MB, reserved 2,048 MB, device total 81,920 MB)")
    )
    result = run_suite(GpuSuite(device="cuda", samples=2), Selection(ops=("oom", "sin")), RunOptions(serial=True))
    verdicts = {r.id: (r.verdict, r.message) for r in result.records}
    oom = verdicts["gpufake::oom::cuda::float64::sample0::grad"]
    assert oom[0] == "error"
    assert "allocated 1,024 MB, reserved 2,048 MB, device total 81,920 MB" in oom[1]
    assert "Tried to allocate 2.00 GiB" in oom[1]
    assert verdicts["gpufake::sin::cuda::float64::sample1::grad"] == ("pass", "")  # the run went on
    assert fake_cuda.freed == 3  # once above, once per out-of-memory case


def test_slow_mode_budget_reads_the_device_memory(fake_cuda):
    budget = RunOptions().budget(split=False, device="cuda")
    assert budget.on_device("cuda").max_bytes == 80 * 2**30 / 4
    assert RunOptions(max_jacobian_mb=10).budget(split=False, device="cuda").on_device("cuda").max_bytes == 10 * 2**20
    assert RunOptions().budget(split=False).on_device("cpu") == RunOptions().budget(split=False)


def test_a_suite_that_does_not_declare_the_device():
    from distcheck.suites import get_suite

    with pytest.raises(UsageError, match="does not run on 'cuda'"):
        get_suite("tests.runner.fake_suite:FakeSuite", "fast", "cuda")


@pytest.mark.slow
@pytest.mark.ray
def test_runners_hold_gpu_shares_on_logical_gpus():
    """4 runners of 0.5 GPU on 2 logical GPUs: each sees one GPU in CUDA_VISIBLE_DEVICES, two
    share each GPU; out-of-memory cases are errors with figures and the runners go on."""
    env = {**os.environ, "PYTHONPATH": ROOT, "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "token")}
    done = subprocess.run(
        [sys.executable, "-m", "tests.runner.gpu_suite", "2", "4", "0.5"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["workers"] == 4
    assert result["placement"] == "4 runner(s) on 2 GPU(s) (0.5 GPU each)"
    records = result["records"]
    where = [r for r in records if "::where::" in r["id"]]
    assert len(where) == 8
    seen = {}
    for record in where:
        found = re.search(r"visible=(\d) gpus=\[(\d)\] pid=(\d+)", record["message"])
        assert found, record["message"]
        visible, gpu, pid = found.groups()
        assert visible == gpu  # Ray's CUDA_VISIBLE_DEVICES is the GPU it assigned
        seen.setdefault(visible, set()).add(pid)
    assert set(seen) <= {"0", "1"} and all(len(pids) <= 2 for pids in seen.values())
    oom = [r for r in records if "::oom::" in r["id"]]
    assert oom and all(r["verdict"] == "error" and "CUDA out of memory (allocated" in r["message"] for r in oom)
    assert all(r["verdict"] == "pass" for r in records if "::sin::" in r["id"])


def test_a_serial_run_never_imports_ray(tmp_path):
    """The GPU machines of gpu_check.sh have no Ray: a serial run must not need it."""
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\n"
        "class _NoRay:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'ray' or name.startswith('ray.'):\n"
        "            raise ImportError('no ray here')\n"
        "sys.meta_path.insert(0, _NoRay())\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    argv = ["-m", "distcheck", "run", "--serial", "--ops", "sin", "--checks", "grad", "--dtypes", "float64"]
    done = subprocess.run(
        [sys.executable, *argv, "--out", str(tmp_path / "run")], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
