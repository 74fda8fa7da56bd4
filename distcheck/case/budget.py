"""Budgets: a case's size and time, estimated before it runs, decide how (and whether) it runs.

A slow-mode check holds a numerical and an analytical Jacobian of (input elements × output
elements) entries (each for the real and imaginary parts of a complex output; gradgradcheck's
of its derived function): the estimate evaluates the function once, times a few evaluations and
backward passes for cases that are not tiny, and counts both from torch's evaluations and
backward passes per element (:func:`_call_estimate`). Over the memory budget a case is skipped,
with the estimate as the reason; above the split threshold it splits (see :class:`Budget`).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass, replace
from enum import StrEnum

from distcheck.check import measure_costs
from distcheck.engines import engine_for, reference_scope
from distcheck.plan.comparisons import serial_bytes
from distcheck.plan.planner import Costs
from distcheck.suites.base import BuiltCase, CheckCall

RAM_FRACTION = 0.25  # default memory budget: this share of the machine's RAM
_TIMED_FROM = 1000  # input + output elements from which the times are measured carefully
_THREE_TIMINGS = (math.inf,) * 3  # the fastest of three (first calls may include one-off initialization)


class Decision(StrEnum):
    """What a case's budget decides: run it whole, skip it (over the memory budget), or split it
    into Jacobian chunks (long)."""

    RUN = "run"
    SKIP = "skip"
    SPLIT = "split"


RUN, SKIP, SPLIT = Decision.RUN, Decision.SKIP, Decision.SPLIT


def machine_ram() -> int:
    """Physical memory of this machine, in bytes."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def default_max_jacobian_mb() -> int:
    return int(machine_ram() * RAM_FRACTION / 2**20)


def human_bytes(count: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB", "PB"):
        if count < 1000 or unit == "PB":
            return f"{count:.3g} {unit}"
        count /= 1000
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class Estimate:
    """Size and single-thread time of a case's largest slow-mode Jacobian (all zeros when
    every call is in fast mode)."""

    columns: int  # input elements: Jacobian columns (finite differences)
    rows: int  # output elements: Jacobian rows (backward passes)
    itemsize: int
    seconds: float
    parts: int = 1  # 2 where a checked output is complex: its real and imaginary parts, checked each

    @property
    def jacobian_bytes(self) -> int:
        return self.columns * self.rows * self.itemsize

    @property
    def bytes(self) -> int:
        """Numerical and analytical Jacobians, both held at once (for each part)."""
        return 2 * self.parts * self.jacobian_bytes

    def describe(self) -> str:
        parts = " of each of the real and imaginary parts" if self.parts == 2 else ""
        return (
            f"Jacobian {self.columns:,} × {self.rows:,} ({human_bytes(self.jacobian_bytes)} dense; "
            f"{human_bytes(self.bytes)} for the numerical and analytical ones{parts}), "
            f"about {self.seconds:.3g} s of work"
        )

    def to_json(self) -> dict:
        return {**asdict(self), "bytes": self.bytes}


@dataclass(frozen=True)
class _Measured:
    columns: int
    rows: int
    itemsize: int
    evaluation: float
    backward: float
    complex_inputs: bool
    complex_outputs: bool


def _measure(case: BuiltCase) -> _Measured:
    """Sizes from one evaluation; for a case that is not tiny, the times of an evaluation and
    of a backward pass (fastest of three: :func:`~distcheck.check.measure_costs`)."""
    engine = engine_for(case.func, case.inputs)
    inputs = [engine.info(x, case.func, k) if engine.is_tensor(x) else None for k, x in enumerate(case.inputs)]
    start = time.perf_counter()
    called = engine.call(case.func, case.inputs)
    evaluation = time.perf_counter() - start
    outputs = [engine.info(o) if engine.is_tensor(o) else None for o in called]
    diff = [i for i in inputs if i is not None and i.requires_grad]
    differentiable = [o for o in outputs if o is not None and o.requires_grad and o.is_float_or_complex and o.numel]
    columns = sum(i.numel for i in diff)
    rows = sum(o.numel for o in differentiable)
    costs = Costs(evaluation, evaluation)
    if columns + rows >= _TIMED_FROM:
        # a scope of its own: the check that follows makes its own reference call, after its
        # suite reseeds the RNGs, as torch's does; it must not differentiate this timing call's
        with reference_scope():
            costs = measure_costs(engine, case.func, case.inputs, outputs, inputs, _THREE_TIMINGS)
    complex_inputs = any(i.is_complex for i in diff)
    complex_outputs = any(o.is_complex for o in differentiable)
    itemsize = 16 if complex_inputs or complex_outputs else 8
    return _Measured(columns, rows, itemsize, costs.evaluation, costs.backward, complex_inputs, complex_outputs)


def _call_estimate(m: _Measured, call: CheckCall) -> Estimate:
    kwargs = call.kwargs
    complex_factor = 2 if m.itemsize == 16 else 1
    if call.function == "gradgradcheck":  # gradcheck of (inputs, grad_outputs) -> grads
        columns, rows = m.columns + m.rows, m.columns
        evaluation, backward = m.evaluation + m.backward, 2 * m.backward
        forward = kwargs.get("check_fwd_over_rev", False)
        parts = 2 if m.complex_inputs else 1  # the derived function's outputs: grads of the inputs
    else:
        columns, rows, evaluation, backward = m.columns, m.rows, m.evaluation, m.backward
        forward = kwargs.get("check_forward_ad", False)
        parts = 2 if m.complex_outputs else 1
    if kwargs.get("fast_mode", False):
        return Estimate(0, 0, m.itemsize, 4 * (evaluation + backward))
    numerical = 2 * complex_factor * columns * evaluation
    analytical = complex_factor * columns * 2 * evaluation if forward else 2 * complex_factor * rows * backward
    return Estimate(columns, rows, m.itemsize, numerical + analytical, parts)


def estimate(case: BuiltCase) -> Estimate:
    """The case's estimate: its largest Jacobian; the time of all its calls."""
    measured = _measure(case)
    calls = [_call_estimate(measured, call) for call in case.calls]
    largest = max(calls, key=lambda e: e.bytes)
    return Estimate(largest.columns, largest.rows, largest.itemsize, sum(e.seconds for e in calls), largest.parts)


def has_slow_calls(case: BuiltCase) -> bool:
    """Whether some check of the case computes full Jacobians (fast_mode off)."""
    return any(call.function != "call" and not call.kwargs.get("fast_mode", False) for call in case.calls)


@dataclass(frozen=True)
class Budget:
    """``max_bytes``: a case whose Jacobians need more is skipped; ``split_seconds``: a case
    estimated at more work splits (None: never), see :meth:`decide`; ``device_memory``:
    ``max_bytes`` is the default, and a case on a GPU gets a quarter of that GPU's memory
    instead (read where it runs, see :meth:`on_device`)."""

    max_bytes: float
    split_seconds: float | None = None
    split_max_bytes: float = float("inf")
    device_memory: bool = False
    cluster_bytes: float | None = None  # None: read from Ray where the case is decided
    block_bytes: float | None = None  # a split case's block budget (None: the Ray executor's default)

    def on_device(self, device: str) -> Budget:
        """The budget of a case on ``device``: the device's default if it has one."""
        if not self.device_memory or device == "cpu":
            return self
        from distcheck.gpus import device_max_jacobian_mb

        max_mb = device_max_jacobian_mb(device)
        return self if max_mb is None else replace(self, max_bytes=max_mb * 2**20, device_memory=False)

    @property
    def block_budget(self) -> float:
        """The most Jacobian bytes one process holds for a split case (its block budget)."""
        if self.block_bytes is not None:
            return self.block_bytes
        from distcheck.executors.ray_settings import default_block_bytes

        return default_block_bytes()

    def decide(self, estimate: Estimate) -> tuple[Decision, str]:
        """``(decision, reason)``. On a Ray cluster a long case splits whatever its Jacobians'
        size (compared block by block on the workers) up to the cluster's memory, and so does
        a short one that checked in one process would hold more than the block budget (within
        ``max_bytes``); no process holds more than that budget of Jacobians. Outside Ray a long
        case splits only if its Jacobians are within ``split_max_bytes``."""
        splits = self.split_seconds is not None
        long = splits and estimate.seconds > self.split_seconds
        held = serial_bytes(estimate.bytes)
        large = splits and not long and self.block_budget < held and estimate.bytes <= self.max_bytes
        cluster = (self.cluster_bytes or cluster_memory()) if long or large else None
        if cluster is not None:
            if estimate.bytes > cluster:
                return SKIP, (
                    f"over the cluster's memory: {estimate.describe()} > {human_bytes(cluster)} "
                    "(the memory of the Ray nodes, all together)"
                )
            if large:
                return (
                    SPLIT,
                    f"Jacobians of {human_bytes(estimate.bytes)}, checked in one process about "
                    f"{human_bytes(held)} > the block budget {human_bytes(self.block_budget)}",
                )
            return SPLIT, f"estimated {estimate.seconds:.3g} s > {self.split_seconds:g} s"
        if estimate.bytes > self.max_bytes:
            return SKIP, (
                f"over the memory budget: {estimate.describe()} > --max-jacobian-mb {self.max_bytes / 2**20:,.0f}"
            )
        if long and estimate.bytes <= self.split_max_bytes:
            return SPLIT, f"estimated {estimate.seconds:.3g} s > {self.split_seconds:g} s"
        return RUN, ""


def cluster_memory() -> float | None:
    """The memory of the Ray this process is connected to, summed over its nodes (the tasks'
    and the object store's), in bytes; None outside Ray."""
    import ray

    if not ray.is_initialized():
        return None
    resources = ray.cluster_resources()
    total = resources.get("memory", 0.0) + resources.get("object_store_memory", 0.0)
    return total or None
