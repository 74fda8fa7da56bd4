"""Units computed a batch at a time (their ``batch`` > 0): the blocks the element-by-element
path computes, from the engine's vectorized calls (:mod:`distcheck.engines.batched`), batch
after batch along the unit's range. Batches start at multiples of ``batch`` from the first
item, so that a batch holds the same items however the work is chunked: every executor
computes the same numbers.

Every batch is spot-checked: its middle item is computed again element by element, torch's way
(the input moved in place, one backward pass, one forward pass), and must agree with the
batch's element by element within the unit's ``spot_tolerance`` ``(rtol, atol)``. A unit that
draws from the engine's global RNG (a function or backward that draws random numbers, which
a batch draws once where the loop draws per item) puts the RNG back as it found it. Either
raises :class:`BatchRefused`, and the reducer judges the whole comparison element by element
(see :mod:`distcheck.plan.vectorize`), as torch does, the RNG included.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from distcheck.engines import Engine
from distcheck.engines.batched import forward_block, host, numerical_block, rows_block
from distcheck.engines.derivatives import column_jvp, row_vjp
from distcheck.kinds import Fallback
from distcheck.numerics.compare import agrees
from distcheck.numerics.finite_differences import jacobian_column
from distcheck.plan.subject import Subject
from distcheck.plan.units.results import ColumnsResult, GradientRows, RepeatedRows, RowsResult, fit


class BatchRefused(AssertionError):
    """A batched unit whose numbers must not decide: why (a :class:`~distcheck.kinds.Fallback`)."""

    def __init__(self, reason: Fallback, message: str):
        super().__init__(message)
        self.reason = reason

    def __reduce__(self):
        return type(self), (self.reason, str(self))


def head_of(unit: Any, items: range) -> Any:
    """The result of batch ``items`` if the unit carries it (``unit.head``: its first batch,
    timed while its check was planned, on the same subject, one thread), else None. The head
    was spot-checked when it was computed."""
    return unit.head if unit.head is not None and items.start == unit.start else None


def refusing_draws(unit_run: Callable[[Any, Engine, Subject], Any]) -> Callable[[Any, Engine, Subject], Any]:
    """``unit_run`` that leaves the engine's global RNG as it found it, and raises
    :class:`BatchRefused` if it moved it."""

    @functools.wraps(unit_run)
    def run(unit: Any, engine: Engine, subject: Subject) -> Any:
        before = engine.rng_state()
        try:
            return unit_run(unit, engine, subject)
        finally:
            if before is not None and not _same_state(before, engine.rng_state()):
                engine.set_rng_state(before)
                raise BatchRefused(Fallback.RANDOMNESS, "the batch drew random numbers from the global RNG")

    return run


def _same_state(a: Any, b: Any) -> bool:
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(map(_same_state, a, b))
    return np.array_equal(np.asarray(a), np.asarray(b))


def batches(unit: Any) -> list[range]:
    """The unit's items, batch by batch."""
    return [range(b, min(b + unit.batch, unit.stop)) for b in range(unit.start, unit.stop, unit.batch)]


def spot_item(batch: range) -> int:
    return batch[len(batch) // 2]


def _spot_check(batched: np.ndarray, exact: np.ndarray | None, tolerance: tuple[float, float], what: str) -> None:
    exact = np.zeros_like(batched) if exact is None else fit(np.asarray(exact).reshape(batched.shape), batched)
    if not agrees(batched, exact, *tolerance):
        raise BatchRefused(
            Fallback.SPOT_CHECK,
            f"{what}: the batched values differ from those computed element by element "
            f"beyond rtol {tolerance[0]:g}, atol {tolerance[1]:g}",
        )


@refusing_draws
def numerical_columns(unit: Any, engine: Engine, subject: Subject) -> list[np.ndarray | None]:
    """A :class:`~distcheck.plan.units.NumericalColumns` unit's blocks, batch by batch."""
    variant = subject.variants[unit.variant]
    wanted = [slot is not None for slot in unit.outputs]
    blocks = [None if s is None else np.zeros((unit.size, s.numel), dtype=s.dtype) for s in unit.outputs]
    evaluate = engine.perturbed_evaluator(variant.func, variant.inputs, unit.position, wanted)
    for items in batches(unit):
        at = slice(items.start - unit.start, items.stop - unit.start)
        head = head_of(unit, items)
        if head is not None:
            for block, values in zip(blocks, head):
                if block is not None:
                    block[at] = values
            continue
        got = numerical_block(
            engine, variant.func, variant.inputs, unit.position, items, unit.eps, unit.is_complex, wanted, unit.loops
        )
        k = spot_item(items)
        exact = [host(engine, c) for c in jacobian_column(evaluate, k, unit.eps, unit.is_complex)]
        for o, (block, values) in enumerate(zip(blocks, got)):
            if block is None:
                continue
            block[at] = values
            _spot_check(values[k - items.start], exact[o], unit.spot_tolerance, f"numerical column {k}")
    return blocks


@refusing_draws
def analytical_rows(unit: Any, engine: Engine, subject: Subject) -> RowsResult:
    """An :class:`~distcheck.plan.units.AnalyticalRows` unit's result, batch by batch, each
    batch's rows computed twice as the element-by-element path computes each row twice."""
    variant = subject.variants[unit.variant]
    positions = [s.position for s in unit.inputs]
    first = GradientRows(unit.inputs, unit.size)
    for rows in (first, RepeatedRows(first)):
        for items in batches(unit):
            at = slice(items.start - unit.start, items.stop - unit.start)
            head = head_of(unit, items)
            if head is not None:
                rows.take(at, head)
                continue
            grads = rows_block(engine, variant.func, variant.inputs, unit.output, positions, items)
            for k, g in enumerate(grads):
                rows.put(k, at, g, g.shape[1:])
    vjp = row_vjp(engine, variant.func, variant.inputs, unit.output, positions)
    for items in batches(unit):
        if head_of(unit, items) is not None:
            continue
        r = spot_item(items)
        for k, exact in enumerate(vjp(r)):
            _spot_check(first.rows[k][r - unit.start], exact, unit.spot_tolerance, f"analytical row {r}")
    return RowsResult.of(first, rows)


@refusing_draws
def forward_columns(unit: Any, engine: Engine, subject: Subject) -> ColumnsResult:
    """A :class:`~distcheck.plan.units.ForwardColumns` unit's result, batch by batch."""
    variant = subject.variants[unit.variant]
    float_outputs = [k for k, slot in enumerate(unit.outputs) if slot is not None]
    blocks = [None if s is None else np.zeros((unit.size, s.numel), dtype=s.dtype) for s in unit.outputs]
    jvp = column_jvp(engine, variant.func, variant.inputs, unit.diff_positions)
    mismatch = False
    for items in batches(unit):
        at = slice(items.start - unit.start, items.stop - unit.start)
        head = head_of(unit, items)
        if head is not None:
            for block, values in zip(blocks, head.blocks):
                if block is not None:
                    block[at] = values
            mismatch = mismatch or head.dtype_mismatch
            continue
        tangents = forward_block(engine, variant.func, variant.inputs, unit.diff_positions, unit.input, items)
        for position, tangent in zip(float_outputs, tangents):
            mismatch = mismatch or np.iscomplexobj(tangent) != unit.output_is_complex[position]
            blocks[position][at] = fit(tangent.reshape(len(items), -1), blocks[position])
        c = spot_item(items)
        for position, exact in zip(float_outputs, jvp(unit.input, c)):
            block = blocks[position]
            _spot_check(block[c - unit.start], exact, unit.spot_tolerance, f"forward column {c}")
    return ColumnsResult(blocks, mismatch)
