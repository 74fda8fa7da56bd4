"""Analytical units: derivatives from the engine's autodiff, backward (VJP) and forward (JVP)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from distcheck.engines import Engine
from distcheck.engines.derivatives import column_jvp, row_vjp
from distcheck.kinds import VariantKey
from distcheck.numerics.compare import max_abs_difference
from distcheck.plan.subject import Subject
from distcheck.plan.units.slots import InputSlot, OutputSlot

ROW_RUNS = 2  # every row is computed twice (backward must be reentrant), both runs held at once


@dataclass(frozen=True)
class RowsResult:
    """Analytical Jacobian rows of one output, for every differentiable input.

    ``blocks[i]`` has shape ``(input i numel, rows)``. Every row was computed twice;
    ``repeat_difference[i]`` is the largest difference between the two (NaN propagates).
    """

    blocks: list[np.ndarray]
    repeat_difference: list[float]
    wrong_size: str | None  # description of the first gradient of the wrong size
    wrong_dtype: str | None


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

    def run(self, engine: Engine, subject: Subject) -> RowsResult:
        variant = subject.variants[self.variant]
        vjp = row_vjp(engine, variant.func, variant.inputs, self.output, [s.position for s in self.inputs])
        grad_outputs = self.items(subject)
        runs = []
        wrong_size = wrong_dtype = None
        dtypes = [np.dtype(s.dtype) for s in self.inputs]
        for _ in range(ROW_RUNS):
            # Row j of rows[k] is one backward's gradient (written contiguously); the block is its
            # transpose (input elements down, as the reference lays Jacobians out), not a copy.
            rows = [np.zeros((len(grad_outputs), s.numel), dtype=s.dtype) for s in self.inputs]
            for column, g in enumerate(grad_outputs):
                for k, grad in enumerate(vjp(g)):
                    if grad is None:
                        continue
                    slot = self.inputs[k]
                    if grad.shape != slot.shape:
                        wrong_size = wrong_size or (
                            f"the gradient of differentiable input {k} has shape {grad.shape}, "
                            f"the input has shape {slot.shape}"
                        )
                        if grad.size != slot.numel:
                            continue
                    elif grad.dtype != dtypes[k]:
                        wrong_dtype = wrong_dtype or (
                            f"the gradient of differentiable input {k} has dtype {grad.dtype}, "
                            f"the input has dtype {slot.dtype}"
                        )
                    rows[k][column] = _fit(grad.reshape(-1), rows[k])
            runs.append([r.T for r in rows])
        first, second = runs
        return RowsResult(first, [max_abs_difference(a, b) for a, b in zip(first, second)], wrong_size, wrong_dtype)


@dataclass(frozen=True)
class ColumnsResult:
    """Forward-mode Jacobian columns of one input: one block per function output (None where
    not checked) of shape ``(columns, output numel)``, as numerical blocks are laid out."""

    blocks: list[np.ndarray | None]
    dtype_mismatch: bool  # a tangent's complexness differs from its output's


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

    def run(self, engine: Engine, subject: Subject) -> ColumnsResult:
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
                blocks[position][row] = _fit(tangent.reshape(-1), blocks[position])
        return ColumnsResult(blocks, mismatch)


def _fit(values: np.ndarray, block: np.ndarray) -> np.ndarray:
    """Values ready to store in ``block``: a complex gradient of a real tensor keeps its real part
    (as torch's copy into a real Jacobian does)."""
    return values.real if np.iscomplexobj(values) and not np.iscomplexobj(block) else values
