"""Analytical units: derivatives from the engine's autodiff, backward (VJP) and forward (JVP)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distcheck.engines import Engine
from distcheck.engines.derivatives import column_jvp, row_vjp
from distcheck.kinds import VariantKey
from distcheck.plan.subject import Subject
from distcheck.plan.units import batches
from distcheck.plan.units.results import ColumnsResult, GradientRows, RepeatedRows, RowsResult, fit
from distcheck.plan.units.slots import InputSlot, OutputSlot


class _Range:
    """A unit over items ``start:stop`` (rows, columns), or the single vector ``vector`` names."""

    start: int
    stop: int
    vector: str | None

    @property
    def size(self) -> int:
        return self.stop - self.start

    def items(self, subject: Subject) -> list | range:
        """The grad-outputs (tangents): the named vector, or one-hot indices."""
        return [subject.data[self.vector]] if self.vector is not None else range(self.start, self.stop)


@dataclass(frozen=True)
class AnalyticalRows(_Range):
    """Backward passes of one output with one-hot grad-outputs at rows ``start:stop`` — or,
    with ``vector`` (a subject.data key), a single pass with that grad-output (fast mode's vᵀJ).
    """

    variant: VariantKey
    output: int  # the output's position among the function's outputs
    start: int
    stop: int
    inputs: tuple[InputSlot, ...]
    vector: str | None = None
    batch: int = 0  # > 0: rows computed that many at a time, vectorized (see units/batches.py)
    spot_tolerance: tuple[float, float] = (0.0, 0.0)  # (rtol, atol) of a batch's spot check
    head: Any = field(default=None, compare=False, repr=False)  # its first batch's result (see batches.py)

    def run(self, engine: Engine, subject: Subject) -> RowsResult:
        if self.batch:
            return batches.analytical_rows(self, engine, subject)
        variant = subject.variants[self.variant]
        vjp = row_vjp(engine, variant.func, variant.inputs, self.output, [s.position for s in self.inputs])
        grad_outputs = self.items(subject)
        first = GradientRows(self.inputs, len(grad_outputs))
        for rows in (first, RepeatedRows(first)):  # every row twice: backward must be reentrant
            for column, g in enumerate(grad_outputs):
                for k, grad in enumerate(vjp(g)):
                    if grad is not None:
                        rows.put(k, column, grad, grad.shape)
        return RowsResult.of(first, rows)


@dataclass(frozen=True)
class ForwardColumns(_Range):
    """Forward-mode JVPs with one-hot tangents at columns ``start:stop`` of one differentiable
    input — or, with ``vector`` (a subject.data key), a single JVP along it (fast mode's J u)."""

    variant: VariantKey
    input: int  # index among the differentiable inputs
    diff_positions: tuple[int, ...]
    start: int
    stop: int
    outputs: tuple[OutputSlot | None, ...]  # per function output; the primal dtype for None checks
    output_is_complex: tuple[bool, ...]
    vector: str | None = None
    batch: int = 0  # > 0: columns computed that many at a time, vectorized (see units/batches.py)
    spot_tolerance: tuple[float, float] = (0.0, 0.0)  # (rtol, atol) of a batch's spot check
    head: Any = field(default=None, compare=False, repr=False)  # its first batch's result (see batches.py)

    def run(self, engine: Engine, subject: Subject) -> ColumnsResult:
        if self.batch:
            return batches.forward_columns(self, engine, subject)
        variant = subject.variants[self.variant]
        jvp = column_jvp(engine, variant.func, variant.inputs, self.diff_positions)
        tangents = self.items(subject)
        float_outputs = [k for k, slot in enumerate(self.outputs) if slot is not None]
        blocks = [None if s is None else np.zeros((len(tangents), s.numel), dtype=s.dtype) for s in self.outputs]
        mismatch = False
        for row, t in enumerate(tangents):
            for position, tangent in zip(float_outputs, jvp(self.input, t)):
                if tangent is None:
                    continue  # an output without tangent: a zero column
                mismatch = mismatch or np.iscomplexobj(tangent) != self.output_is_complex[position]
                blocks[position][row] = fit(tangent.reshape(-1), blocks[position])
        return ColumnsResult(blocks, mismatch)
