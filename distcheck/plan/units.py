"""Work units: small, picklable descriptions of independent pieces of a check.

A unit names a variant of the check's subject and a slice of work (a range of Jacobian
columns, a range of rows, one auxiliary check). ``run`` computes it against the subject with
the engine and returns plain data (numpy arrays, floats, flags); :func:`execute` wraps that
into a :class:`UnitResult`, capturing exceptions so that the reducer can raise them in the
reference's order whatever order the units finished in.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from typing import Any

import numpy as np

from distcheck.engines import Engine, get_engine
from distcheck.numerics.compare import max_abs_difference
from distcheck.numerics.finite_differences import jacobian_columns
from distcheck.plan.subject import Subject


@dataclass(frozen=True)
class OutputSlot:
    """A function output whose numerical Jacobian a unit computes."""

    numel: int
    dtype: str  # numpy dtype name of the Jacobian block


@dataclass(frozen=True)
class NumericalColumns:
    """Finite-difference columns ``start:stop`` of one input, for every checked output."""

    variant: str
    position: int  # the input's position in the variant's inputs
    start: int
    stop: int
    eps: float
    shape: tuple[int, ...]
    is_complex: bool
    outputs: tuple[OutputSlot | None, ...]  # one per function output; None = not needed

    @property
    def size(self) -> int:
        return self.stop - self.start

    def run(self, engine: Engine, subject: Subject) -> list[np.ndarray | None]:
        variant = subject.variants[self.variant]
        evaluate = engine.perturbed_evaluator(
            variant.func, variant.inputs, self.position, [slot is not None for slot in self.outputs]
        )

        def where(k: int) -> str:
            return f"on index {tuple(int(i) for i in np.unravel_index(k, self.shape))} "

        return jacobian_columns(
            evaluate,
            range(self.start, self.stop),
            self.eps,
            self.is_complex,
            [None if s is None else s.numel for s in self.outputs],
            [None if s is None else np.dtype(s.dtype) for s in self.outputs],
            where,
        )


@dataclass(frozen=True)
class InputSlot:
    """A differentiable input, as analytical units see it."""

    position: int
    shape: tuple[int, ...]
    dtype: str  # numpy dtype name

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


@dataclass(frozen=True)
class RowsResult:
    """Analytical Jacobian rows ``start:stop`` of one output, for every differentiable input.

    ``blocks[i]`` has shape ``(input i numel, stop - start)``. Each row was computed twice;
    ``repeat_difference[i]`` is the largest difference between the two (NaN propagates).
    """

    blocks: list[np.ndarray]
    repeat_difference: list[float]
    wrong_size: str | None  # description of the first gradient of the wrong size
    wrong_dtype: str | None


@dataclass(frozen=True)
class AnalyticalRows:
    """Backward passes with one-hot grad-outputs at rows ``start:stop`` of one output."""

    variant: str
    output: int  # the output's position among the function's outputs
    start: int
    stop: int
    inputs: tuple[InputSlot, ...]

    @property
    def size(self) -> int:
        return self.stop - self.start

    def run(self, engine: Engine, subject: Subject) -> RowsResult:
        variant = subject.variants[self.variant]
        vjp = engine.vjp(variant.func, variant.inputs, self.output, [s.position for s in self.inputs])
        first = [np.zeros((s.numel, self.size), dtype=s.dtype) for s in self.inputs]
        second = [np.zeros((s.numel, self.size), dtype=s.dtype) for s in self.inputs]
        wrong_size = wrong_dtype = None
        for blocks in (first, second):  # every row twice: backward must be reentrant
            for column, j in enumerate(range(self.start, self.stop)):
                for k, (grad, slot) in enumerate(zip(vjp(j), self.inputs)):
                    if grad is None:
                        continue
                    if grad.shape != slot.shape:
                        wrong_size = wrong_size or (
                            f"the gradient of differentiable input {k} has shape {grad.shape}, "
                            f"the input has shape {slot.shape}"
                        )
                        if grad.size != slot.numel:
                            continue
                    elif grad.dtype != np.dtype(slot.dtype):
                        wrong_dtype = wrong_dtype or (
                            f"the gradient of differentiable input {k} has dtype {grad.dtype}, "
                            f"the input has dtype {slot.dtype}"
                        )
                    values = grad.reshape(-1)
                    if np.iscomplexobj(values) and not np.iscomplexobj(blocks[k]):
                        values = values.real
                    blocks[k][:, column] = values
        return RowsResult(
            first,
            [max_abs_difference(a, b) for a, b in zip(first, second)],
            wrong_size,
            wrong_dtype,
        )


@dataclass(frozen=True)
class AuxiliaryCheck:
    """One of the engine's auxiliary checks, run on a variant (passes or raises)."""

    variant: str
    check: str  # "zero_grad_output" | "undefined_grad"
    masked: bool = False

    size = 1

    def run(self, engine: Engine, subject: Subject) -> None:
        variant = subject.variants[self.variant]
        if self.check == "zero_grad_output":
            engine.check_zero_grad_output(variant.func, variant.inputs, self.masked)
        elif self.check == "undefined_grad":
            engine.check_undefined_grad(variant.func, variant.inputs)
        else:
            raise ValueError(f"unknown auxiliary check {self.check!r}")


Unit = NumericalColumns | AnalyticalRows | AuxiliaryCheck


@dataclass
class UnitResult:
    """A unit's value, or the exception it raised (with the traceback as text)."""

    value: Any = None
    error: BaseException | None = None
    traceback: str = ""
    seconds: float = 0.0
    worker: str = ""  # where it ran (process id / node), for tests and reports

    def unwrap(self) -> Any:
        """The value, or raise the unit's exception (with the worker's traceback attached when
        it crossed a process boundary and lost its own)."""
        if self.error is not None:
            if self.error.__traceback__ is None and self.traceback:
                self.error.add_note(f"(raised in distcheck worker {self.worker}:)\n{self.traceback}")
            raise self.error
        return self.value


def execute(unit: Unit, subject: Subject, threads: int = 1, worker: str = "") -> UnitResult:
    """Run one unit with ``threads`` intra-op threads; never raises (errors are captured)."""
    engine = get_engine(subject.engine)
    start = time.perf_counter()
    try:
        with engine.threads(threads):
            value = unit.run(engine, subject)
        return UnitResult(value=value, seconds=time.perf_counter() - start, worker=worker)
    except Exception as e:  # the reducer re-raises it in the reference's order
        return UnitResult(error=e, traceback=traceback.format_exc(), seconds=time.perf_counter() - start, worker=worker)
