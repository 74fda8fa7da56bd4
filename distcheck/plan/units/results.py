"""What analytical units return: rows of backward passes (computed twice, for the reentrancy
check) and columns of forward-mode JVPs, as Jacobian blocks."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from distcheck.numerics.compare import max_abs_difference
from distcheck.plan.units.slots import InputSlot

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

    @classmethod
    def of(cls, runs: list[GradientRows]) -> RowsResult:
        """The result of the unit's two runs of its rows."""
        first, second = (rows.blocks() for rows in runs)
        repeat = [max_abs_difference(a, b) for a, b in zip(first, second)]
        wrong_size = next((r.wrong_size for r in runs if r.wrong_size), None)
        wrong_dtype = next((r.wrong_dtype for r in runs if r.wrong_dtype), None)
        return cls(first, repeat, wrong_size, wrong_dtype)


class GradientRows:
    """One run of a unit's rows as its backward passes give them: row j of ``rows[k]`` is the
    gradient of differentiable input k for the unit's j-th grad-output (written contiguously;
    the block is its transpose, input elements down, as the reference lays Jacobians out, not a
    copy), with the first gradient of the wrong size or dtype described."""

    def __init__(self, inputs: tuple[InputSlot, ...], count: int):
        self.inputs = inputs
        self.dtypes = [np.dtype(s.dtype) for s in inputs]
        self.rows = [np.zeros((count, s.numel), dtype=s.dtype) for s in inputs]
        self.wrong_size: str | None = None
        self.wrong_dtype: str | None = None

    def put(self, k: int, at: int | slice, grads: np.ndarray, shape: tuple[int, ...]) -> None:
        """Store at rows ``at`` of input k the gradients ``grads``, each of ``shape``."""
        slot = self.inputs[k]
        if shape != slot.shape:
            self.wrong_size = self.wrong_size or (
                f"the gradient of differentiable input {k} has shape {shape}, the input has shape {slot.shape}"
            )
            if math.prod(shape) != slot.numel:
                return
        elif grads.dtype != self.dtypes[k]:
            self.wrong_dtype = self.wrong_dtype or (
                f"the gradient of differentiable input {k} has dtype {grads.dtype}, the input has dtype {slot.dtype}"
            )
        block = self.rows[k]
        block[at] = fit(grads.reshape(block[at].shape), block)

    def blocks(self) -> list[np.ndarray]:
        return [r.T for r in self.rows]


@dataclass(frozen=True)
class ColumnsResult:
    """Forward-mode Jacobian columns of one input: one block per function output (None where
    not checked) of shape ``(columns, output numel)``, as numerical blocks are laid out."""

    blocks: list[np.ndarray | None]
    dtype_mismatch: bool  # a tangent's complexness differs from its output's


def fit(values: np.ndarray, block: np.ndarray) -> np.ndarray:
    """Values ready to store in ``block``: a complex gradient of a real tensor keeps its real part
    (as torch's copy into a real Jacobian does)."""
    return values.real if np.iscomplexobj(values) and not np.iscomplexobj(block) else values
