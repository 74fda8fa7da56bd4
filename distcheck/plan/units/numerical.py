"""Numerical units: finite differences (the function is only evaluated, never differentiated)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distcheck.engines import Engine
from distcheck.kinds import VariantKey
from distcheck.numerics.finite_differences import jacobian_columns, wirtinger_derivative
from distcheck.plan.subject import Subject
from distcheck.plan.units import batches
from distcheck.plan.units.slots import OutputSlot


@dataclass(frozen=True)
class SparseColumns:
    """Columns of a sparse input: ``blocks`` as for a dense one, and the dense (flat) input
    element of each of their rows."""

    blocks: list[np.ndarray | None]
    rows: np.ndarray


@dataclass(frozen=True)
class NumericalColumns:
    """Finite-difference columns ``start:stop`` of one input, for every checked output.

    Returns one block per function output (None where not checked), of shape
    ``(stop - start, output numel)``: input elements down, output elements across.
    """

    variant: VariantKey
    position: int  # the input's position in the variant's inputs
    start: int
    stop: int
    eps: float
    shape: tuple[int, ...]
    is_complex: bool
    outputs: tuple[OutputSlot | None, ...]
    sparse: bool = False  # columns are the input's specified values: return their dense rows too
    batch: int = 0  # > 0: columns computed that many at a time, vectorized (see units/batches.py)
    spot_tolerance: tuple[float, float] = (0.0, 0.0)  # (rtol, atol) of a batch's spot check
    head: Any = field(default=None, compare=False, repr=False)  # its first batch's result (see batches.py)
    loops: bool = False  # a batch loops over its items where an operation has no batching rule

    @property
    def size(self) -> int:
        return self.stop - self.start

    def run(self, engine: Engine, subject: Subject) -> list[np.ndarray | None] | SparseColumns:
        if self.batch:
            return batches.numerical_columns(self, engine, subject)
        variant = subject.variants[self.variant]
        evaluate = engine.perturbed_evaluator(
            variant.func, variant.inputs, self.position, [slot is not None for slot in self.outputs]
        )
        rows = engine.element_rows(variant.inputs[self.position]) if self.sparse else None

        def where(k: int) -> str:
            flat = k if rows is None else int(rows[k])
            return f"on index {tuple(int(i) for i in np.unravel_index(flat, self.shape))} "

        blocks = jacobian_columns(
            evaluate,
            range(self.start, self.stop),
            self.eps,
            self.is_complex,
            [None if s is None else s.numel for s in self.outputs],
            [None if s is None else np.dtype(s.dtype) for s in self.outputs],
            where,
            engine.stack,
        )
        return blocks if rows is None else SparseColumns(blocks, rows[self.start : self.stop])


@dataclass(frozen=True)
class NumericalProjection:
    """Fast mode's ``J u`` by finite differences along the random direction ``u`` (for a
    complex input, ``u = (ur, ui)``: the real and imaginary directions, combined as a
    conjugate Wirtinger derivative). Returns one flat vector per output (None where not checked).
    """

    variant: VariantKey
    position: int
    vectors: tuple[str, ...]  # subject.data keys: (ur,) or (ur, ui)
    eps: float
    outputs: tuple[bool, ...]

    size = 1

    def run(self, engine: Engine, subject: Subject) -> list[np.ndarray | None]:
        variant = subject.variants[self.variant]
        evaluate = engine.direction_evaluator(variant.func, variant.inputs, self.position, list(self.outputs))
        real = subject.data[self.vectors[0]] * self.eps
        imag = subject.data[self.vectors[1]] * self.eps * 1j if len(self.vectors) > 1 else None
        derivative = wirtinger_derivative(evaluate, real, imag, self.eps)
        # an input on a device: the projection was taken there; one copy to the host per output
        return [d if d is None or isinstance(d, np.ndarray) else engine.to_numpy(d) for d in derivative]
