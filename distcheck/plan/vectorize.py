"""Batched Jacobian blocks in a plan: the slow-mode comparisons whose work is worth batching
become :class:`~distcheck.plan.stages.BatchedComparison` stages, with torch's verdicts and
messages by construction.

For each slow-mode Jacobian comparison of a planned check (and each check that a function
without differentiable outputs has a zero numerical Jacobian), each of its workloads (the numerical
columns of an input, the analytical rows of an output, the forward columns of an input) is
batched or not as :func:`~distcheck.plan.batch_choice.decide` finds. A comparison is batched
when some of its work is and none of its numerical columns (most of its work: two evaluations
per column, four for a complex input) cannot or must not be (a vmap error, a closure over the
input, a sparse input); otherwise it stays as planned, and the first such reason (else why the
work would not pay) says why. A batched comparison keeps its element-by-element twin (the
comparison as planned, run only if needed) and compares the batched Jacobians first, where it
decides only a clear pass:

- every element within :data:`CLEAR` of its tolerance: ``|a - n| <= CLEAR·(atol + rtol·|n|)``
  (a zero Jacobian: every element exactly zero, each batch's spot item equal to torch's way)
  (so that the last-bit differences between a batch and torch's loop, which finite differences
  amplify by 1/eps and are measured below 1e-8 on op_db, cannot turn a pass into a failure);
- the rows' two runs within ``nondet_tol``, sizes and dtypes as the reference wants them;
- every batch's spot check agreeing: its middle item computed again torch's way within
  :data:`SPOT` of the tolerance, element by element (a bound on how far a batch may be from the
  loop where it was not checked: a batch computes every item with the same kernels).

Anything else, and any error of a batch, is judged again by the element-by-element twin, so
that every failure, and every number in its message, is the exact path's. Batched units cover
whole batches: the policy cuts a batched workload into chunks of whole batches, so that a batch
holds the same items on every executor and gives the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from distcheck.engines import Engine
from distcheck.kinds import Fallback
from distcheck.options import Batching, CheckOptions
from distcheck.plan.batch_choice import HELD_FACTOR, Held, decide
from distcheck.plan.chunking import ChunkPolicy, Workload
from distcheck.plan.stages import (
    Auxiliary,
    BatchedComparison,
    JacobianComparison,
    ProjectedComparison,
    Stage,
    ZeroNumericalJacobian,
)
from distcheck.plan.subject import Subject
from distcheck.plan.units import Unit
from distcheck.plan.units.slots import slots_bytes

CLEAR = 0.5  # a batched comparison decides a pass only within this fraction of the tolerances
SPOT = 0.01  # a batch's spot item agrees with torch's way within this fraction of them
Tolerance = tuple[float, float]  # (rtol, atol)
EXACTLY = (0.0, 0.0)  # a zero Jacobian's batches: the spot item equal to torch's way, bit for bit

# Why a workload may stay element by element while the rest of its comparison is batched: it
# would not pay. Any other reason (the function cannot be batched, or must not be) keeps the
# whole comparison element by element, so that its reason is counted.
_NOT_WORTH = (Fallback.SMALL, Fallback.SLOWER, Fallback.MEMORY)


def vectorized(
    units: list[Unit],
    stages: list[Stage],
    subject: Subject,
    engine: Engine,
    options: CheckOptions,
    policy: ChunkPolicy,
    batching: Batching,
    call_seconds: float | None = None,
) -> tuple[list[Unit], list[Stage], dict[int, Fallback]]:
    """The plan's units and stages with its worthwhile work batched, and why each slow-mode
    comparison left element by element is (by stage index). ``call_seconds``: what one call of
    the function took, if known."""
    tolerance = (SPOT * options.rtol, SPOT * options.atol)
    batcher = _Batcher(list(units), subject, engine, policy, batching, call_seconds)
    new_stages: list[Stage] = []
    reasons: dict[int, Fallback] = {}
    for index, stage in enumerate(stages):
        if isinstance(stage, JacobianComparison):
            batched = _batched_stage(batcher, units, stage, tolerance)
        elif isinstance(stage, ZeroNumericalJacobian) and stage.tolerance is None:
            batched = _batched_stage(batcher, units, stage, EXACTLY)
        else:
            new_stages.append(stage)
            continue
        if isinstance(batched, Fallback):
            new_stages.append(stage)
            reasons[index] = batched
        else:
            new_stages.append(batched)
    return _compacted(batcher.made, new_stages) + (reasons,)


def _batched_stage(
    batcher: _Batcher,
    units: Sequence[Unit],
    stage: JacobianComparison | ZeroNumericalJacobian,
    tolerance: Tolerance,
) -> BatchedComparison | Fallback:
    """The stage with its worthwhile work batched (its batches spot-checked within
    ``tolerance``), or why it stays element by element."""
    running = _running_bytes(units, stage)
    numerical = [batcher.batched(group, running, tolerance) for group in stage.numerical]
    cannot = next((c for c in numerical if isinstance(c, Fallback) and c not in _NOT_WORTH), None)
    rows = getattr(stage, "analytical", ())
    analytical = [] if cannot else [batcher.batched(group, running, tolerance) for group in rows]
    left = [c for c in numerical + analytical if isinstance(c, Fallback)]
    if cannot or len(left) == len(numerical) + len(analytical):
        return cannot or next((c for c in left if c != Fallback.SMALL), Fallback.SMALL)
    pick = lambda c, g: g if isinstance(c, Fallback) else c  # noqa: E731
    on_batches = replace(stage, numerical=tuple(map(pick, numerical, stage.numerical)))
    if rows:
        on_batches = replace(on_batches, analytical=tuple(map(pick, analytical, rows)))
    return BatchedComparison(on_batches, *_twin(units, stage))


def _running_bytes(units: Sequence[Unit], stage: JacobianComparison | ZeroNumericalJacobian) -> float:
    """What one item of a batch of the stage's work holds: :data:`~distcheck.plan.batch_choice.HELD_FACTOR`
    times the stage's inputs and outputs."""
    outputs = units[stage.numerical[0][0]].outputs if stage.numerical and stage.numerical[0] else ()
    return HELD_FACTOR * (slots_bytes(stage.inputs) + slots_bytes(outputs))


@dataclass
class _Batcher:
    """The batched units of a plan's workloads, made once per workload (the numerical columns of
    complex outputs' two parts are one workload), appended to ``made``."""

    made: list[Unit]
    subject: Subject
    engine: Engine
    policy: ChunkPolicy
    batching: Batching
    call_seconds: float | None
    workloads: dict[tuple[int, ...], tuple[int, ...] | Fallback] = field(default_factory=dict)

    def batched(self, group: tuple[int, ...], running: float, tolerance: Tolerance) -> tuple[int, ...] | Fallback:
        """The batched units of the workload made of units ``group`` (their batches spot-checked
        within ``tolerance``), or why it stays element by element."""
        if group not in self.workloads:
            self.workloads[group] = self._batch(group, running, tolerance)
        return self.workloads[group]

    def _batch(self, group: tuple[int, ...], running: float, tolerance: Tolerance) -> tuple[int, ...] | Fallback:
        first, last = self.made[group[0]], self.made[group[-1]]
        if getattr(first, "vector", None) is not None:  # fast mode's vector units: one item each
            return Fallback.SMALL
        whole = replace(first, start=0, stop=last.stop)
        held = Held(running, _result_bytes(whole), getattr(self.policy, "block_bytes", math.inf))
        decision = decide(self.batching, self.engine, self.subject, whole, held, tolerance, self.call_seconds)
        if decision.reason is not None:
            return decision.reason
        size = decision.batch
        count = math.ceil(whole.stop / size)
        batched = replace(whole, batch=size, spot_tolerance=tolerance)
        if decision.loops:  # an operation without a batching rule loops inside every batch
            batched = replace(batched, loops=True)
        start = len(self.made)
        work = Workload(count, decision.seconds, _result_bytes(whole) * size)
        for a, b in self.policy.chunks(work) or [(0, count)]:
            self.made.append(replace(batched, start=a * size, stop=min(b * size, whole.stop)))
        if decision.trial is not None:  # the first batch, computed while deciding: not computed again
            self.made[start] = replace(self.made[start], head=decision.trial)
        return tuple(range(start, len(self.made)))


def _result_bytes(unit: Any) -> int:
    """What one item of a unit's result holds."""
    return slots_bytes(unit.inputs if hasattr(unit, "inputs") else unit.outputs)


def _twin(units: Sequence[Unit], stage: JacobianComparison | ZeroNumericalJacobian) -> tuple[Any, tuple[Unit, ...]]:
    """The stage over its own copy of its units (the element-by-element twin)."""
    rows = getattr(stage, "analytical", ())
    order: dict[int, int] = {}
    for group in (*stage.numerical, *rows):
        for u in group:
            order.setdefault(u, len(order))
    local = lambda groups: tuple(tuple(order[u] for u in g) for g in groups)  # noqa: E731
    twin = replace(stage, numerical=local(stage.numerical))
    if rows:
        twin = replace(twin, analytical=local(rows))
    return twin, tuple(units[u] for u in order)


def _compacted(units: list[Unit], stages: list[Stage]) -> tuple[list[Unit], list[Stage]]:
    """Only the units some stage uses, the stages' indices renumbered."""
    used = sorted({u for stage in stages for u in _uses(stage)})
    number = {old: new for new, old in enumerate(used)}
    return [units[u] for u in used], [_renumbered(stage, number) for stage in stages]


def _uses(stage: Stage) -> list[int]:
    match stage:
        case BatchedComparison(batched=inner):
            return _uses(inner)
        case JacobianComparison() | ZeroNumericalJacobian():
            groups = list(stage.numerical) + list(getattr(stage, "analytical", ()))
            return [u for g in groups for u in g]
        case ProjectedComparison():
            return list(stage.numerical) + list(stage.analytical)
        case Auxiliary():
            return [stage.unit]
    raise TypeError(f"unknown stage {stage!r}")


def _renumbered(stage: Stage, number: dict[int, int]) -> Stage:
    groups = lambda gs: tuple(tuple(number[u] for u in g) for g in gs)  # noqa: E731
    match stage:
        case BatchedComparison(batched=inner):
            return replace(stage, batched=_renumbered(inner, number))
        case JacobianComparison():
            return replace(stage, numerical=groups(stage.numerical), analytical=groups(stage.analytical))
        case ZeroNumericalJacobian():
            return replace(stage, numerical=groups(stage.numerical))
        case ProjectedComparison():
            return replace(
                stage,
                numerical=tuple(number[u] for u in stage.numerical),
                analytical=tuple(number[u] for u in stage.analytical),
            )
        case Auxiliary():
            return replace(stage, unit=number[stage.unit])
    raise TypeError(f"unknown stage {stage!r}")
