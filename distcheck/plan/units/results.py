"""What analytical units return: rows of backward passes (computed twice, for the reentrancy
check: the first run held, the second compared with it as it comes) and columns of forward-mode
JVPs, as Jacobian blocks."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from distcheck.numerics.compare import max_abs_difference
from distcheck.plan.units.slots import InputSlot

WAITING_BYTES = 1 << 22  # single rows of the second run an input holds before they are compared


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
    def of(cls, first: GradientRows, second: RepeatedRows) -> RowsResult:
        """The result of the unit's two runs of its rows."""
        wrong_size = first.wrong_size or second.wrong_size
        wrong_dtype = first.wrong_dtype or second.wrong_dtype
        return cls(first.blocks(), second.differences(), wrong_size, wrong_dtype)


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
        values = _checked(self, k, grads, shape)
        if values is not None:
            block = self.rows[k]
            block[at] = fit(values.reshape(block[at].shape), block)

    def take(self, at: slice, head: RowsResult) -> None:
        """Store at rows ``at`` the first run of the batch ``head`` holds."""
        for rows, block in zip(self.rows, head.blocks):
            rows[at] = block.T
        self.wrong_size = self.wrong_size or head.wrong_size
        self.wrong_dtype = self.wrong_dtype or head.wrong_dtype

    def blocks(self) -> list[np.ndarray]:
        return [r.T for r in self.rows]


class RepeatedRows:
    """The second run of a unit's rows, compared with the first run's (``first``) and not kept:
    :meth:`differences` is the largest difference per input, as if both runs were held whole
    (a row one run stored and the other did not counts against zero; NaN propagates). A batch
    of rows is compared as it comes; single rows (the element-by-element path) wait, up to
    :data:`WAITING_BYTES` an input, to be compared together."""

    def __init__(self, first: GradientRows):
        self.first, self.inputs, self.dtypes = first, first.inputs, first.dtypes
        self.stored = [np.zeros(len(rows), dtype=bool) for rows in first.rows]
        self.largest: list[list[float]] = [[] for _ in first.rows]
        self.waiting: list[list[int]] = [[] for _ in first.rows]  # rows of ``scratch[k]``, in order
        self.scratch: list[np.ndarray | None] = [None for _ in first.rows]
        self.wrong_size: str | None = None
        self.wrong_dtype: str | None = None

    def put(self, k: int, at: int | slice, grads: np.ndarray, shape: tuple[int, ...]) -> None:
        """Compare the gradients ``grads`` (each of ``shape``) of input k at rows ``at`` with the first run's."""
        values = _checked(self, k, grads, shape)
        if values is None:
            return
        held = self.first.rows[k][at]
        again = fit(values.reshape(held.shape), held)
        if isinstance(at, slice):
            self._compare(k, at, held, again.astype(held.dtype, copy=False))  # cast as a store casts
        else:
            self._wait(k, at, again)

    def _wait(self, k: int, row: int, again: np.ndarray) -> None:
        """Hold row ``row`` of input k (cast as a store casts) until :data:`WAITING_BYTES` wait."""
        rows = self.first.rows[k]
        if self.scratch[k] is None:
            count = max(1, WAITING_BYTES // max(1, rows[0].nbytes))
            self.scratch[k] = np.empty((min(len(rows), count), *rows.shape[1:]), rows.dtype)
        waiting = self.waiting[k]
        self.scratch[k][len(waiting)] = again
        waiting.append(row)
        if len(waiting) == len(self.scratch[k]):
            self._flush(k)

    def take(self, at: slice, head: RowsResult) -> None:
        """Count the batch ``head`` holds at rows ``at``: its own two runs' differences."""
        for largest, stored, difference in zip(self.largest, self.stored, head.repeat_difference):
            largest.append(difference)
            stored[at] = True

    def differences(self) -> list[float]:
        out = []
        for k, (rows, stored, largest) in enumerate(zip(self.first.rows, self.stored, self.largest)):
            self._flush(k)
            unseen = rows[~stored]  # rows this run did not give: their difference is the first's
            if unseen.size:
                largest.append(max_abs_difference(unseen, np.zeros_like(unseen)))
            out.append(float(np.max(largest)) if largest else 0.0)  # np.max: NaN propagates
        return out

    def _flush(self, k: int) -> None:
        """Compare the single rows of input k that wait."""
        waiting = self.waiting[k]
        if not waiting:
            return
        if all(b - a == 1 for a, b in zip(waiting, waiting[1:])):  # rows in a row: no copy of the first run's
            at: slice | np.ndarray = slice(waiting[0], waiting[-1] + 1)
        else:
            at = np.array(waiting)
        self._compare(k, at, self.first.rows[k][at], self.scratch[k][: len(waiting)])
        self.waiting[k] = []

    def _compare(self, k: int, at: slice | np.ndarray, held: np.ndarray, again: np.ndarray) -> None:
        self.largest[k].append(max_abs_difference(held, again))
        self.stored[k][at] = True


def _checked(run: GradientRows | RepeatedRows, k: int, grads: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """``grads`` if they can be stored for input k (a gradient of the input's element count,
    whatever its shape), else None; the run's first wrong size or dtype described."""
    slot = run.inputs[k]
    if shape != slot.shape:
        run.wrong_size = run.wrong_size or (
            f"the gradient of differentiable input {k} has shape {shape}, the input has shape {slot.shape}"
        )
        if math.prod(shape) != slot.numel:
            return None
    elif grads.dtype != run.dtypes[k]:
        run.wrong_dtype = run.wrong_dtype or (
            f"the gradient of differentiable input {k} has dtype {grads.dtype}, the input has dtype {slot.dtype}"
        )
    return grads


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
