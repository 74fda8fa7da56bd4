"""The Ray executor: the same numbers and verdicts as the serial executor, on several workers."""

from __future__ import annotations

import ctypes
import dataclasses
import os
import pickle
import threading
import time

import numpy as np
import pytest
import torch
from ray import cloudpickle

import distcheck
import distcheck.check as check_module
from distcheck import Batching
from distcheck.check import plan_check
from distcheck.executors import resolve
from distcheck.executors.ray_executor import RayExecutor, resolve_address
from distcheck.executors.ray_front import RayFront, default_ray_executor
from distcheck.executors.ray_tasks import _portable
from distcheck.executors.serial import SerialExecutor
from distcheck.options import CheckOptions
from distcheck.plan.chunking import Whole
from distcheck.plan.units import NumericalColumns, UnitResult
from distcheck.reduce.reducer import assembled_jacobians
from tests.parity.cases import ALL
from tests.parity.runner import run
from tests.test_parity import MODE_RUNS


class Pieces:
    """A policy that cuts everything into pieces of ``size`` items (one unit per task)."""

    needs_costs = False

    def __init__(self, size: int):
        self.size = size

    def chunks(self, workload):
        return [(s, min(s + self.size, workload.items)) for s in range(0, workload.items, self.size)] or [(0, 0)]


@pytest.fixture(scope="module")
def executors(ray_cluster):
    """The default Ray executor (cost model), one without chunking, one with tiny chunks."""
    return {"cost model": RayExecutor(), "whole": RayExecutor(policy=Whole()), "pieces": RayExecutor(policy=Pieces(2))}


def _x(*shape, seed=0):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)).requires_grad_()


# -- same numbers as serial ---------------------------------------------------------------


def _checks_of(case, **options) -> list[tuple]:
    """``(func, inputs, options)`` of every check the distcheck API plans for ``case``, as
    gradcheck / gradgradcheck really plan it (derived function, seeded grad-outputs)."""
    calls = []
    plan = check_module.plan_check

    def spy(func, inputs, options, executor):
        calls.append((func, inputs, options))
        return plan(func, inputs, options, executor)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(check_module, "plan_check", spy)
        run(case, "distcheck", executor=SerialExecutor(), **options)
    return calls


def _same(a, b) -> bool:
    """Bitwise equality of unit values (arrays, floats, dataclasses, containers)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and (a.dtype, a.shape) == (b.dtype, b.shape)
            and a.tobytes() == b.tobytes()
        )
    if isinstance(a, float) and isinstance(b, float):
        return np.float64(a).tobytes() == np.float64(b).tobytes()
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return type(a) is type(b) and all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return a == b


def _error(e: BaseException) -> tuple[str, str]:
    return type(e).__name__, str(e)


def _unit_outcomes(func, inputs, options, executor):
    """Each unit's value (or exception), or the exception that planning raised."""
    try:
        _, plan = plan_check(func, inputs, options, executor)
    except Exception as e:
        return _error(e)
    results = executor.submit(plan.subject, plan.units)
    try:
        return [r.value if r.error is None else _error(r.error) for r in map(results.get, range(len(plan.units)))]
    finally:
        results.close()


def _jacobians(func, inputs, options, executor):
    """Every Jacobian of the plan, assembled (or the first exception)."""
    try:
        _, plan = plan_check(func, inputs, options, executor)
        results = executor.submit(plan.subject, plan.units)
    except Exception as e:
        return _error(e)
    try:
        return assembled_jacobians(plan, results)
    except Exception as e:
        return _error(e)
    finally:
        results.close()


def _assert_same_units(checks, executor) -> None:
    """Every unit of every check gives, on ``executor``, bitwise the serial executor's result."""
    if not checks:
        pytest.skip("the check fails before planning (its verdict is compared below)")
    for func, inputs, options in checks:
        serial = _unit_outcomes(func, inputs, options, SerialExecutor())
        if not _same(serial, _unit_outcomes(func, inputs, options, SerialExecutor())):
            pytest.skip("the function is nondeterministic by design: two serial runs differ")
        assert _same(_unit_outcomes(func, inputs, options, executor), serial)


@pytest.mark.filterwarnings("ignore:Input #0 requires gradient and is not a double")
@pytest.mark.parametrize("case", ALL, ids=str)
def test_every_number_is_bitwise_the_serial_one(case, executors):
    # element by element: a timed batching choice may plan the serial and the Ray run apart
    # (batched units on Ray are compared on plans batched untimed, below)
    checks = _checks_of(case, vectorize=False)
    _assert_same_units(checks, executors["whole"])  # the same units: every result, bitwise
    for func, inputs, options in checks:  # other chunkings: the assembled Jacobians, bitwise
        reference = _jacobians(func, inputs, options, SerialExecutor())
        for name in ("cost model", "pieces"):
            ours = _jacobians(func, inputs, options, executors[name])
            assert type(ours) is type(reference), (name, ours, reference)
            if isinstance(reference, tuple):
                assert ours == reference, name
                continue
            assert ours.keys() == reference.keys(), name
            for key in reference:
                assert _same(ours[key], reference[key]), (name, key)


@pytest.mark.parametrize("case", ALL, ids=str)
def test_verdicts_are_torchs(case, executors):
    reference = run(case, "torch")
    for name in ("cost model", "pieces"):
        ours = run(case, "distcheck", executor=executors[name])
        assert ours.comparable() == reference.comparable(), f"\n{name}\ntorch:     {reference}\ndistcheck: {ours}"


BATCHED_SAMPLE = [
    c
    for c in ALL
    if c.name
    in {"sin", "conv2d", "two_outputs", "complex_sin", "real_to_complex", "wrong_scale", "gg_matmul", "gg_complex"}
]


@pytest.mark.parametrize("case", BATCHED_SAMPLE, ids=str)
def test_batched_units_give_the_serial_numbers(case, executors):
    """Batched units (batches on a grid of the batch size, whatever the chunks) give on Ray
    bitwise the serial numbers, however the work is chunked; and the same verdicts."""
    force = Batching(measure=False, min_seconds=0)
    checks = _checks_of(case, vectorize=force)
    _assert_same_units(checks, executors["whole"])
    for func, inputs, options in checks:
        reference = _jacobians(func, inputs, options, SerialExecutor())
        for name in ("cost model", "pieces"):
            ours = _jacobians(func, inputs, options, executors[name])
            if isinstance(reference, tuple):  # a batch that raises (an autograd.Function without vmap)
                assert ours == reference, name
                continue
            assert ours.keys() == reference.keys(), name
            assert all(_same(ours[key], reference[key]) for key in reference), name
        serial = run(case, "distcheck", executor=SerialExecutor(), vectorize=force)
        assert run(case, "distcheck", executor=executors["pieces"], vectorize=force).comparable() == serial.comparable()


# The parity suite's other modes (fast, forward, batched, masked...), on a sample of its cases.
MODE_SAMPLE = {
    "sin",
    "two_outputs",
    "complex_sin",
    "real_to_complex",
    "complex_to_real_abs",
    "wrong_scale",
    "missing_conjugate",
    "gg_matmul",
    "gg_complex",
    "jvp_wrong",
    "item_in_backward",
    "sparse_coo_dense_grad",
    "sparse_csr_masked_grad",
}


@pytest.mark.parametrize(
    ("case", "mode", "options"), [param for param in MODE_RUNS if param.values[0].name in MODE_SAMPLE]
)
def test_every_mode_gives_the_serial_numbers_and_verdict(case, mode, options, executors):
    _assert_same_units(_checks_of(case, vectorize=False, **options), executors["whole"])
    serial = run(case, "distcheck", executor=SerialExecutor(), **options)
    assert run(case, "distcheck", executor=executors["cost model"], **options).comparable() == serial.comparable()


# -- work is spread, the subject is shipped once --------------------------------------------


def slow_sin(x):
    """sin, 1 ms per evaluation: enough work for the cost model to split the check."""
    time.sleep(0.001)
    return x.sin()


def test_a_large_check_is_split_over_several_workers(executors):
    executor = executors["cost model"]
    if executor.workers < 2:
        pytest.skip("needs a Ray with at least 2 CPUs")
    # 600 evaluations, element by element (batched, they would take one sleep per batch): ≥ 0.6 s
    _, plan = plan_check(slow_sin, (_x(300),), CheckOptions(vectorize=False), executor)
    columns = [u for u in plan.units if isinstance(u, NumericalColumns)]
    assert len(columns) >= 2
    results = executor.submit(plan.subject, plan.units)
    try:
        assert results.tasks >= len(columns)
        assert len({results.get(k).worker for k in range(len(plan.units))}) > 1
    finally:
        results.close()
    assert distcheck.gradcheck(slow_sin, (_x(300),), executor=executor)


def test_a_small_check_is_one_task(executors):
    _, plan = plan_check(torch.sin, (_x(3),), CheckOptions(), executors["cost model"])
    results = executors["cost model"].submit(plan.subject, plan.units)
    try:
        assert len(plan.units) > 1 and results.tasks == 1
        assert results.get(0).error is None
    finally:
        results.close()


class CountsUnpickling:
    """sin, which appends its process id to ``path`` whenever it is unpickled."""

    def __init__(self, path):
        self.path = str(path)

    def __call__(self, x):
        return x.sin()

    def __setstate__(self, state):
        self.__dict__.update(state)
        with open(self.path, "a") as f:
            f.write(f"{os.getpid()}\n")


def test_the_subject_is_deserialized_once_per_worker_not_per_task(executors, tmp_path):
    func = CountsUnpickling(tmp_path / "unpickled")
    _, plan = plan_check(func, (_x(30),), CheckOptions(vectorize=False), executors["pieces"])
    results = executors["pieces"].submit(plan.subject, plan.units)
    try:
        assert all(results.get(k).error is None for k in range(len(plan.units)))
        assert results.tasks >= 30
    finally:
        results.close()
    pids = (tmp_path / "unpickled").read_text().split()
    assert len(pids) == len(set(pids)) <= executors["pieces"].workers


# -- failures -------------------------------------------------------------------------------


class SleepsInWorkers:
    """sin that sleeps ``seconds`` per evaluation outside the driver process: in Python, 10 ms
    at a time (a cancelled task is interrupted between two calls), or with ``in_c=True`` in
    one C call (which only a forced cancel, killing the worker, interrupts)."""

    def __init__(self, seconds: int, in_c: bool = False):
        self.seconds, self.in_c, self.driver = seconds, in_c, os.getpid()

    def __call__(self, x):
        if os.getpid() != self.driver:
            if self.in_c:
                ctypes.CDLL(None).sleep(self.seconds)
            for _ in range(100 * self.seconds):
                time.sleep(0.01)
        return x.sin()


@pytest.mark.parametrize("in_c", [False, True], ids=["python", "blocking C call"])
def test_cancelling_stops_queued_and_running_tasks(ray_cluster, in_c):
    executor = RayExecutor(policy=Pieces(1), cancel_grace=0.5)
    _, plan = plan_check(SleepsInWorkers(30, in_c), (_x(6),), CheckOptions(), executor)
    results = executor.submit(plan.subject, plan.units)
    time.sleep(0.5)  # the first tasks are running
    start = time.monotonic()
    results.cancel()

    @ray_cluster.remote(num_cpus=1)
    def free() -> bool:
        return True

    assert ray_cluster.get([free.remote() for _ in range(executor.workers)], timeout=30)
    assert time.monotonic() - start < 15  # not the 30 s sleep, let alone the queue behind it


def test_cancelling_from_another_thread_ends_a_waiting_get(ray_cluster):
    executor = RayExecutor(policy=Pieces(1), cancel_grace=0.5)
    _, plan = plan_check(SleepsInWorkers(30), (_x(4),), CheckOptions(), executor)
    results = executor.submit(plan.subject, plan.units)
    threading.Timer(0.5, results.cancel).start()  # as a suite runner's timeout does
    start = time.monotonic()
    assert isinstance(results.get(0).error, ray_cluster.exceptions.TaskCancelledError)
    assert isinstance(results.get(len(plan.units) - 1).error, ray_cluster.exceptions.TaskCancelledError)
    assert time.monotonic() - start < 15


def test_the_subject_keeps_requires_grad_on_its_way_to_workers():
    indices = torch.tensor([[0, 1], [1, 0]])
    sparse = torch.sparse_coo_tensor(indices, torch.ones(2, dtype=torch.float64), (2, 2)).requires_grad_()
    _, plan = plan_check(lambda x: x.to_dense().sin(), (sparse,), CheckOptions(), SerialExecutor())
    (arrived,) = pickle.loads(cloudpickle.dumps(plan.subject)).variants["f"].inputs
    assert arrived.requires_grad  # torch 2.13 alone drops it for sparse COO tensors


def test_a_function_workers_cannot_import_is_reported(executors, tmp_path, monkeypatch):
    (tmp_path / "only_on_the_driver.py").write_text("def double(x):\n    return x * 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import only_on_the_driver

    with pytest.raises(ModuleNotFoundError, match="only_on_the_driver"):
        distcheck.gradcheck(only_on_the_driver.double, (_x(3),), executor=executors["cost model"])


class NeedsTwoArguments(Exception):
    def __init__(self, a, b):
        super().__init__(f"{a} and {b}")


def test_an_exception_that_cannot_be_unpickled_keeps_its_name_and_message():
    result = _portable(UnitResult(error=NeedsTwoArguments(1, 2), traceback="Traceback ..."))
    assert isinstance(result.error, RuntimeError)
    assert "NeedsTwoArguments: 1 and 2" in str(result.error) and result.traceback == "Traceback ..."
    assert _portable(UnitResult(error=ValueError("x"))).error.args == ("x",)


# -- configuration --------------------------------------------------------------------------


def test_environment_variables_switch_a_suite_to_ray(ray_cluster, monkeypatch):
    monkeypatch.setenv("DISTCHECK_EXECUTOR", "ray")
    monkeypatch.setenv("DISTCHECK_RAY_ADDRESS", "auto")
    monkeypatch.setenv("DISTCHECK_LOCAL_BELOW", "0")  # every check to Ray, however small
    executor = resolve(None)
    assert isinstance(executor, RayFront) and executor is default_ray_executor()
    assert executor.address == "auto" and executor.executor().address == "auto"
    submitted, submit = [], RayExecutor.submit
    monkeypatch.setattr(RayExecutor, "submit", lambda self, *a: submitted.append(a) or submit(self, *a))
    assert distcheck.gradcheck(torch.sin, (_x(3),))
    assert submitted


def test_addresses(monkeypatch):
    monkeypatch.delenv("DISTCHECK_RAY_ADDRESS", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert resolve_address(None) is None and resolve_address("local") is None
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")  # as inside `ray job submit`
    assert resolve_address(None) == "10.0.0.1:6379"
    monkeypatch.setenv("DISTCHECK_RAY_ADDRESS", "ray://head:10001")
    assert resolve_address(None) == "ray://head:10001"
    assert resolve_address("auto") == "auto"


def test_closing_lets_the_tasks_finish(ray_cluster):
    """close() drops results without cancelling (a cancel racing a task's completion crashes
    Ray 2.60's driver): the tasks still run to their end."""
    executor = RayExecutor(policy=Pieces(1))
    _, plan = plan_check(SleepsInWorkers(1), (_x(2),), CheckOptions(), executor)
    results = executor.submit(plan.subject, plan.units)
    refs = list(results._refs)
    results.close()
    finished = ray_cluster.get(refs, timeout=60)
    assert all(r.error is None for task in finished for r in task)
