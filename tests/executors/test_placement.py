"""Where the Ray executor runs a check: in-process when its estimated work is under
``local_below`` seconds or its subject cannot be pickled, on Ray otherwise; the verdict and the
global RNG after the check are the same either way, and torch's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import distcheck
from distcheck.check import plan_check
from distcheck.executors import ray_front
from distcheck.executors.ray_executor import LocalResults, RayExecutor, RayResults, local_below
from distcheck.executors.ray_front import RayFront, default_ray_executor
from distcheck.executors.ray_settings import ray_saving
from distcheck.options import CheckOptions

ROOT = Path(__file__).resolve().parents[2]


class Unpicklable:
    """tanh, that pickle refuses (as pybind11 functions and aten overloads are refused)."""

    def __call__(self, x):
        return x.tanh()

    def __reduce__(self):
        raise TypeError(f"{self!r} is not pickleable")


def _x(n: int) -> torch.Tensor:
    return torch.randn(n, dtype=torch.float64, requires_grad=True)


def _submitted(executor: RayExecutor, func, inputs):
    _, plan = plan_check(func, inputs, CheckOptions(), executor)
    results = executor.submit(plan.subject, plan.units)
    results.close()
    return results


def test_under_the_threshold_in_process_else_on_ray(ray_cluster):
    small = _submitted(RayExecutor(local_below=1e9), torch.sin, (_x(4),))
    assert isinstance(small, LocalResults) and (small.placed, small.tasks) == ("small", 0)
    large = _submitted(RayExecutor(local_below=1e-9), torch.sin, (_x(4),))
    assert isinstance(large, RayResults) and large.tasks >= 1
    assert isinstance(_submitted(RayExecutor(), torch.sin, (_x(4),)), RayResults)  # 0: no threshold


def test_an_unpicklable_function_runs_in_process_and_passes(ray_cluster):
    executor = RayExecutor()
    assert _submitted(executor, Unpicklable(), (_x(5),)).placed == "unpicklable"
    assert distcheck.gradcheck(Unpicklable(), (_x(5),), executor=executor)
    assert distcheck.gradgradcheck(Unpicklable(), (_x(5),), executor=executor)


def test_torch_operators_go_to_ray_by_name(ray_cluster):
    """``torch.ops.aten.<op>[.<overload>]`` hold pybind11 records that pickle refuses: sent by
    name, a large check of one (a slow-mode test of ``torch.ops.aten.convolution``) splits over
    the cluster instead of running in-process, with the in-process verdict and message."""
    import functools

    from ray import cloudpickle

    from distcheck.executors.ray_executor import dumps_subject

    operators = (torch.ops.aten.convolution, torch.ops.aten.mul.Tensor)
    assert all(a is b for a, b in zip(cloudpickle.loads(dumps_subject(operators)), operators, strict=True))
    scaled = functools.partial(torch.ops.aten.mul.Tensor, other=3.0)
    assert isinstance(_submitted(RayExecutor(), scaled, (_x(5),)), RayResults)  # was: in-process, unpicklable
    assert distcheck.gradcheck(scaled, (_x(5),), executor=RayExecutor(), fast_mode=False)
    wrong = functools.partial(torch.ops.aten.add.Tensor, other=torch.ones(5, dtype=torch.float64), alpha=1e-3)
    x = _x(5)

    def message(executor):
        with pytest.raises(distcheck.GradcheckError) as raised:
            distcheck.gradcheck(lambda t: wrong(t) + t.detach(), (x,), executor=executor, fast_mode=False)
        return str(raised.value)

    assert message(RayExecutor()) == message("serial")


def test_while_no_ray_runs_checks_stay_in_process_until_what_ray_would_save_pays_its_start(monkeypatch):
    """On P workers a running Ray ends a check of work W after W / P: it saves W (P - 1) / P.
    Checks stay in-process while the savings forgone on them, the current one's included,
    are under the start's cost; the check that brings them to it goes to Ray (one large
    enough alone goes at once); once Ray runs, every check over local_below goes there;
    local_below 0 still sends every check to Ray."""
    assert (ray_saving(4.0, 2), ray_saving(8.0, 4), ray_saving(3.0, None)) == (2.0, 6.0, 3.0)
    assert ray_saving(100.0, 1) == 0.0  # one CPU: Ray never wins
    for name in ("DISTCHECK_RAY_ADDRESS", "RAY_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("distcheck.executors.ray_settings.local_cpus", lambda: 2)
    running = [False]
    monkeypatch.setattr(ray_front, "ray_connected", lambda: running[0])
    _, plan = plan_check(torch.sin, (_x(4),), CheckOptions(), RayFront())
    work = [4.0]
    monkeypatch.setattr(ray_front, "estimated_seconds", lambda subject, units: work[0])

    front = RayFront(local_below=1.0, start=5.0)
    places = [front.place(plan.subject, plan.units) for _ in range(3)]
    assert places == ["startup", "startup", None]  # saved 2 s, 4 s; the third brings it to 6 s
    assert front.forgone == 4.0
    from distcheck.executors import ray_start

    running[0] = True  # Ray runs, its workers warm for this process's job: every check over local_below goes there
    monkeypatch.setattr(ray_start, "workers_warm", lambda: True)
    monkeypatch.setattr(ray_start, "cluster_cpus", lambda: 2)
    assert front.place(plan.subject, plan.units) is None
    work[0] = 0.5
    assert front.place(plan.subject, plan.units) == "small"
    running[0] = False
    work[0] = 12.0  # saves 6 s alone: Ray at once
    assert RayFront(local_below=1.0, start=5.0).place(plan.subject, plan.units) is None
    work[0] = 0.5  # small checks never count towards a start
    small = RayFront(local_below=1.0, start=5.0)
    assert [small.place(plan.subject, plan.units) for _ in range(50)] == ["small"] * 50 and small.forgone == 0
    work[0] = 4.0
    monkeypatch.setattr("distcheck.executors.ray_settings.local_cpus", lambda: 1)
    alone = RayFront(local_below=1.0, start=5.0)
    assert [alone.place(plan.subject, plan.units) for _ in range(20)] == ["startup"] * 20  # one CPU: never
    assert RayFront(local_below=0.0).place(plan.subject, plan.units) is None


def test_a_ray_running_without_warm_workers_costs_their_warm_up(monkeypatch):
    """The user's own ray.init(): checks stay in-process until what Ray would save on them
    reaches the workers' warm-up (``warm``), planned for the running Ray's CPUs; once this
    process's job has warm workers, nothing."""
    from distcheck.executors import ray_start

    monkeypatch.setattr(ray_front, "ray_connected", lambda: True)
    monkeypatch.setattr(ray_start, "cluster_cpus", lambda: 4)
    warm = [False]
    monkeypatch.setattr(ray_start, "workers_warm", lambda: warm[0])
    work = [1.5]  # saves 1.125 s on 4 CPUs
    monkeypatch.setattr(ray_front, "estimated_seconds", lambda subject, units: work[0])
    front = RayFront(local_below=1.0, start=5.0, warm=2.0)
    assert front.workers == 4
    _, plan = plan_check(torch.sin, (_x(4),), CheckOptions(), front)
    assert [front.place(plan.subject, plan.units) for _ in range(2)] == ["startup", None]
    warm[0] = True
    assert RayFront(local_below=1.0, start=5.0, warm=2.0).place(plan.subject, plan.units) is None


def test_the_default_ray_executor_reads_its_threshold(monkeypatch):
    monkeypatch.delenv("DISTCHECK_LOCAL_BELOW", raising=False)
    assert local_below() == default_ray_executor().local_below > 0
    monkeypatch.setenv("DISTCHECK_LOCAL_BELOW", "0.25")
    assert local_below() == 0.25


@pytest.mark.parametrize("threshold", [0.0, 1e9], ids=["on ray", "in-process"])
@pytest.mark.parametrize("fast_mode", [False, True], ids=["slow", "fast"])
def test_the_global_rng_after_a_check_is_torchs(ray_cluster, threshold, fast_mode):
    """Batched-gradient checks draw their grad-outputs from torch's global RNG: a test's next
    samples, drawn after the check, must be those it draws under torch's gradcheck."""
    options = dict(check_batched_grad=True, fast_mode=fast_mode)
    func = lambda a, b: (a * b.exp(), a.sum() * b)  # noqa: E731 (two outputs: two draws each)
    states = []
    for check in (torch.autograd.gradcheck, distcheck.gradcheck):
        torch.manual_seed(7)
        inputs = (_x(6), _x(6))
        kwargs = {"executor": RayExecutor(local_below=threshold)} if check is distcheck.gradcheck else {}
        assert check(func, inputs, **options, **kwargs)
        states.append(torch.get_rng_state())
    assert torch.equal(*states)


def test_the_verdict_of_a_wrong_gradient_does_not_depend_on_where(ray_cluster):
    class WrongSquare(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 3 * x

    x, messages = _x(4), []
    for threshold in (0.0, 1e9):
        with pytest.raises(distcheck.GradcheckError, match="Jacobian mismatch") as raised:
            distcheck.gradcheck(WrongSquare.apply, (x,), executor=RayExecutor(local_below=threshold))
        messages.append(str(raised.value))
    assert messages[0] == messages[1]


NO_RAY = """
import ray, torch
import distcheck
from distcheck.executors.ray_executor import RayExecutor

class Unpicklable:
    def __call__(self, x):
        return x.tanh()

    def __reduce__(self):
        raise TypeError("not pickleable")

x = torch.randn(4, dtype=torch.float64, requires_grad=True)
assert distcheck.gradcheck(torch.sin, (x,), executor="ray")
assert distcheck.gradgradcheck(torch.sin, (x,), executor="ray")
assert distcheck.gradcheck(Unpicklable(), (x,), executor=RayExecutor())
print("ray started:", ray.is_initialized())
"""


def test_checks_that_run_in_process_start_no_ray(tmp_path):
    """Planning asks the executor for its workers: a local Ray not yet started reports the CPUs
    it would have instead of starting (seconds of CPU, and the workers' warm-up, for nothing)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in ("DISTCHECK_RAY_ADDRESS", "RAY_ADDRESS", "DISTCHECK_LOCAL_BELOW"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-c", NO_RAY], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "ray started: False" in done.stdout
    # a cluster by address whose CPUs are known (an xdist worker of the plugin's session): not
    # joined either (nothing listens there); nor, by executor="ray", one whose CPUs only joining tells
    env.update(DISTCHECK_RAY_ADDRESS="127.0.0.1:1", DISTCHECK_RAY_CPUS="3")
    done = subprocess.run([sys.executable, "-c", NO_RAY], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "ray started: False" in done.stdout
    del env["DISTCHECK_RAY_CPUS"]
    front_only = NO_RAY.replace("assert distcheck.gradcheck(Unpicklable(), (x,), executor=RayExecutor())", "")
    done = subprocess.run(
        [sys.executable, "-c", front_only], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "ray started: False" in done.stdout
