"""An engine from outside distcheck, as a plugin would write one: arrays of its own type
(:class:`Vec`, an immutable wrapper of a numpy array) and functions with a hand-written VJP
(:class:`ToyFunction`). Only the primitives of :class:`distcheck.engines.base.Engine`; nothing
in distcheck names it (tests register it through an entry point or ``register_engine``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np

from distcheck.engines.base import Engine, TensorInfo
from distcheck.errors import GradcheckError
from distcheck.kinds import Part
from distcheck.numerics.random_vectors import unit_vectors

TARGET = f"{__name__}:ToyEngine"


class Vec:
    """The toy library's array: a read-only numpy array inside."""

    def __init__(self, values: Any):
        self.values = np.array(values, copy=True)
        self.values.setflags(write=False)


@dataclass(frozen=True)
class ToyFunction:
    """``fun`` on numpy arrays, and ``vjp(*inputs, grad_output)`` -> one gradient per input."""

    fun: Callable
    vjp: Callable

    def __call__(self, *inputs):
        return Vec(self.fun(*[x.values if isinstance(x, Vec) else x for x in inputs]))


def sin(x):
    return np.sin(x)


def sin_vjp(x, g):
    return (g * np.cos(x),)


def doubled_sin_vjp(x, g):
    return (2 * g * np.cos(x),)


GOOD, WRONG = ToyFunction(sin, sin_vjp), ToyFunction(sin, doubled_sin_vjp)


class ToyEngine(Engine):
    name = "toy"
    library, array_type = __name__, "Vec"
    error_class = GradcheckError

    def is_tensor(self, value: Any) -> bool:
        return isinstance(value, Vec)

    def info(self, value: Vec, func: Callable | None = None, position: int | None = None) -> TensorInfo:
        dtype = value.values.dtype
        return TensorInfo.of(value.values.shape, dtype, f"toy.{dtype}", dtype.kind in "fc")

    def to_numpy(self, value: Vec) -> np.ndarray:
        return np.array(value.values, copy=True)

    def from_numpy(self, array: np.ndarray, like: Vec) -> Vec:
        return Vec(np.asarray(array, dtype=like.values.dtype))

    def call(self, func: Callable, inputs: tuple) -> tuple:
        return (func(*inputs),)

    def _moved(self, func, inputs, position, values, outputs) -> list[np.ndarray | None]:
        moved = list(inputs)
        moved[position] = Vec(values)
        return [o.values.copy() if want else None for o, want in zip(self.call(func, tuple(moved)), outputs)]

    def perturbed_evaluator(self, func: Callable, inputs: tuple, position: int, outputs: Sequence[bool]):
        def evaluate(k: int, delta: complex) -> list[np.ndarray | None]:
            values = inputs[position].values.copy()
            values.reshape(-1)[k] += delta
            return self._moved(func, inputs, position, values, outputs)

        return evaluate

    def direction_evaluator(self, func: Callable, inputs: tuple, position: int, outputs: Sequence[bool]):
        def evaluate(delta: np.ndarray) -> list[np.ndarray | None]:
            x = inputs[position].values
            return self._moved(func, inputs, position, x + np.asarray(delta).reshape(x.shape), outputs)

        return evaluate

    def pullback(self, func, inputs, outputs, diff_positions, output_positions, create_graph=False):
        plain = [x.values if isinstance(x, Vec) else x for x in inputs]

        def pullback(cotangents):
            (g,) = cotangents
            g = np.zeros_like(outputs[0].values) if g is None else g.values
            grads = func.vjp(*plain, g)
            return [Vec(grads[p]) for p in diff_positions]

        return pullback

    def complex_part(self, value: Any, part: Part) -> Any:
        return Vec(getattr(value.values, part)) if isinstance(value, Vec) else value

    def complex_join(self, part_value: Vec, other: Vec, part: Part) -> Vec:
        a, b = part_value.values, other.values
        return Vec(a + 1j * b if part == Part.REAL else b + 1j * a)

    def random_unit_vectors(self, numels: Sequence[int], dtypes: Sequence[np.dtype]) -> list[np.ndarray]:
        return unit_vectors(numels, dtypes)

    def random_normal(self, shapes: Sequence[tuple[int, ...]], dtypes: Sequence[np.dtype]) -> list[np.ndarray]:
        return [np.random.standard_normal(shape).astype(dtype) for shape, dtype in zip(shapes, dtypes)]

    def random_grad_outputs(self, outputs: Sequence[Vec], noncontiguous: bool) -> tuple:
        return tuple(Vec(np.random.uniform(-1, 1, o.values.shape).astype(o.values.dtype)) for o in outputs)

    def format_block(self, block: np.ndarray) -> str:
        return np.array2string(block)

    def threads(self, n: int) -> nullcontext:
        return nullcontext()
