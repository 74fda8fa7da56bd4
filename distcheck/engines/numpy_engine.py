"""numpy engine: functions on numpy arrays with hand-written VJPs (and optionally JVPs).

A checked function is a :class:`NumpyFunction`::

    f = distcheck.numpy_function(fun, vjp=vjp, jvp=jvp)

- ``fun(*inputs)`` returns an array or a tuple of arrays;
- ``vjp(*inputs, *grad_outputs)`` returns one gradient per differentiable input (None for
  zero); it gets one grad-output per float/complex output, and must accept None there
  (an undefined grad-output, to be treated as zeros);
- ``jvp(*inputs, *tangents)`` (optional) returns one tangent per float/complex output.

Differentiable inputs are the float/complex arrays (or those listed in ``argnums``).
Complex numbers follow PyTorch's convention: for a real loss L of z = x + iy, the gradient
is dL/dx + i·dL/dy. For gradgradcheck the VJP must itself be a ``numpy_function`` (a
function of ``(*inputs, *grad_outputs)`` with its own VJP): the check recurses on it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np

from distcheck.engines.base import Engine, TensorInfo
from distcheck.engines.tuples import as_tuple
from distcheck.engines.wording import Wording
from distcheck.errors import EngineCapabilityError, GradcheckError
from distcheck.kinds import Part
from distcheck.numerics.random_vectors import unit_vectors


@dataclass(frozen=True)
class NumpyFunction:
    """A numpy function with its hand-written derivatives. Build it with :func:`numpy_function`."""

    fun: Callable[..., Any]
    vjp: Callable[..., Any] | None = None
    jvp: Callable[..., Any] | None = None
    argnums: tuple[int, ...] | None = None

    def __call__(self, *inputs):
        return self.fun(*inputs)

    def differentiable(self, position: int, value: Any) -> bool:
        floating = isinstance(value, np.ndarray) and value.dtype.kind in "fc"
        return floating and (self.argnums is None or position in self.argnums)


def numpy_function(
    fun: Callable[..., Any],
    vjp: Callable[..., Any] | None = None,
    *,
    jvp: Callable[..., Any] | None = None,
    argnums: Sequence[int] | None = None,
) -> NumpyFunction:
    """Wrap a numpy function and its hand-written VJP (and JVP) for distcheck's checks."""
    if not callable(fun):
        raise TypeError(f"numpy_function: fun must be callable, got {type(fun).__name__}")
    for name, d in (("vjp", vjp), ("jvp", jvp)):
        if d is not None and not callable(d):
            raise TypeError(f"numpy_function: {name} must be callable, got {type(d).__name__}")
    return NumpyFunction(fun, vjp, jvp, None if argnums is None else tuple(int(a) for a in argnums))


def _is_float_or_complex(x: Any) -> bool:
    return isinstance(x, np.ndarray) and x.dtype.kind in "fc"


def _require(func: Any) -> NumpyFunction:
    if not isinstance(func, NumpyFunction):
        raise TypeError(
            "numpy inputs need a function with hand-written derivatives: wrap it as "
            "distcheck.numpy_function(fun, vjp=...) (got a plain "
            f"{type(func).__name__})"
        )
    return func


@dataclass(frozen=True)
class _OutputPart:
    """The real or imaginary part of a NumpyFunction's complex outputs."""

    func: NumpyFunction
    part: Part

    def __call__(self, *inputs):
        return tuple(_part(o, self.part) for o in _outputs(self.func, inputs))


@dataclass(frozen=True)
class _OutputParts:
    """A NumpyFunction's outputs as their ``parts``, part after part, from one evaluation."""

    func: NumpyFunction
    parts: tuple[Part, ...]

    def __call__(self, *inputs):
        outputs = _outputs(self.func, inputs)
        return tuple(_part(o, part) for part in self.parts for o in outputs)


def _part(value, part: Part):
    if not np.iscomplexobj(value):
        return value
    return np.real(value) if part == Part.REAL else np.imag(value)


@dataclass(frozen=True)
class _OutputPartVJP:
    """VJP of :class:`_OutputPart`: for L = sum(g·Im z) the grad-output of z is 1j·g
    (PyTorch's convention); for Re z it is g."""

    func: NumpyFunction
    part: Part
    n_inputs: int

    def __call__(self, *args):
        inputs, grad_outputs = args[: self.n_inputs], args[self.n_inputs :]
        originals = [o for o in _outputs(self.func, inputs) if _is_float_or_complex(o)]
        scaled = tuple(
            g if g is None or self.part == Part.REAL or not np.iscomplexobj(o) else 1j * g
            for g, o in zip(grad_outputs, originals)
        )
        return self.func.vjp(*inputs, *scaled)


def _outputs(func: NumpyFunction, inputs: tuple) -> tuple:
    return tuple(
        np.asarray(o) if np.isscalar(o) or isinstance(o, np.generic) else o for o in as_tuple(func.fun(*inputs))
    )


def _tangents(func: NumpyFunction, inputs: tuple, tangents: Sequence) -> list[np.ndarray | None]:
    outputs = [o for o in _outputs(func, inputs) if _is_float_or_complex(o)]
    result = as_tuple(func.jvp(*inputs, *tangents))
    if len(result) != len(outputs):
        raise GradcheckError(
            f"the jvp returned {len(result)} tangents, expected one per float/complex output ({len(outputs)})"
        )
    return [None if t is None else np.asarray(t) for t in result]


@dataclass(frozen=True)
class _InputPart:
    """A NumpyFunction seen as a function of the real or imaginary parts of its complex inputs."""

    func: NumpyFunction
    positions: tuple[int, ...]
    originals: tuple[np.ndarray, ...]
    part: Part

    def full(self, inputs: tuple) -> tuple:
        full = list(inputs)
        for i, original in zip(self.positions, self.originals):
            full[i] = inputs[i] + 1j * original.imag if self.part == Part.REAL else original.real + 1j * inputs[i]
        return tuple(full)

    def __call__(self, *inputs):
        return self.func.fun(*self.full(inputs))


@dataclass(frozen=True)
class _InputPartJVP:
    """JVP of :class:`_InputPart`: a tangent t of an imaginary part is 1j·t on the complex input."""

    split: _InputPart
    diff_positions: tuple[int, ...]

    def __call__(self, *args):
        n = len(args) - len(self.diff_positions)
        inputs, tangents = args[:n], list(args[n:])
        for k, p in enumerate(self.diff_positions):
            if p in self.split.positions and tangents[k] is not None:
                tangents[k] = tangents[k] * (1.0 + 0j) if self.split.part == Part.REAL else 1j * tangents[k]
        return self.split.func.jvp(*self.split.full(inputs), *tangents)


def _grads(func: NumpyFunction, inputs: tuple, grad_outputs: Sequence, n_diff: int) -> list[np.ndarray | None]:
    if func.vjp is None:
        raise EngineCapabilityError("this numpy_function has no vjp: backward-mode checks need one")
    grads = as_tuple(func.vjp(*inputs, *grad_outputs))
    if len(grads) != n_diff:
        raise GradcheckError(
            f"the vjp returned {len(grads)} gradients, expected one per differentiable input ({n_diff})"
        )
    return [None if g is None else np.asarray(g) for g in grads]


class NumpyWording(Wording):
    """The numpy engine's messages: torch's, where a hand-written VJP takes None for undefined."""

    def undefined_raised(self, label: str, error: Exception) -> str | None:
        if isinstance(error, GradcheckError):  # the VJP's own result was malformed: said already
            return None
        return (
            "Expected the vjp to handle undefined (None) output grads as zeros "
            f"(it raised, with {label}: {type(error).__name__}: {error})"
        )

    def undefined_nonzero(self, label: str, position: int, values: np.ndarray) -> str:
        return (
            "Expected all input grads to be undefined or zero when all output grads are "
            f"undefined or zero (nonzero grad for differentiable input {position}, with {label})"
        )

    def undefined_tangent(self, index: int, position: int, value: Any, got: Any, expected: Any) -> str:
        return (
            f"Mismatch in tangent values for output with index: {index} when differentiable input {position} "
            f"has an undefined (None) tangent: got {got} but a zero tangent gives {expected}"
        )


class NumpyEngine(Engine):
    name = "numpy"
    library, array_type = "numpy", "ndarray"
    error_class = GradcheckError
    wording = NumpyWording()

    def requires_grad(self, value: Any, func: Any = None, position: int | None = None) -> bool:
        """An input is differentiated only by a :class:`NumpyFunction` (to any other function a
        numpy array is a constant); an output when it is float/complex."""
        if not isinstance(value, np.ndarray):
            return False
        if func is None:
            return _is_float_or_complex(value)
        return isinstance(func, NumpyFunction) and func.differentiable(position, value)

    def is_tensor(self, value: Any) -> bool:
        return isinstance(value, np.ndarray)

    def info(self, value: np.ndarray, func: Any = None, position: int | None = None) -> TensorInfo:
        fn = _require(func) if func is not None else None
        requires_grad = fn.differentiable(position, value) if fn is not None else _is_float_or_complex(value)
        return TensorInfo.of(
            value.shape,
            value.dtype,
            str(value.dtype),
            requires_grad,
            overlapping=any(st == 0 and sz > 1 for st, sz in zip(value.strides, value.shape)),
        )

    def to_numpy(self, value: np.ndarray) -> np.ndarray:
        return np.array(value, copy=True)

    def from_numpy(self, array: np.ndarray, like: np.ndarray) -> np.ndarray:
        return np.asarray(array, dtype=like.dtype)

    def call(self, func: Any, inputs: tuple) -> tuple:
        return _outputs(_require(func), inputs)

    def threads(self, n: int) -> nullcontext:
        return nullcontext()  # numpy's element-wise math here is single-threaded already

    def output_part(self, func: Any, part: Part, n_inputs: int) -> NumpyFunction:
        fn = _require(func)
        vjp = None if fn.vjp is None else _OutputPartVJP(fn, part, n_inputs)
        return NumpyFunction(_OutputPart(fn, part), vjp, None, fn.argnums)

    def output_parts(self, func: Any, parts: tuple[Part, ...]) -> NumpyFunction:
        fn = _require(func)
        return NumpyFunction(_OutputParts(fn, parts), None, None, fn.argnums)

    def perturbed_evaluator(self, func: Any, inputs: tuple, position: int, outputs: Sequence[bool]):
        fn = _require(func)
        inputs = list(inputs)
        x = inputs[position] = np.array(inputs[position], copy=True)
        shape = x.shape

        def evaluate(k: int, delta: complex) -> list[np.ndarray | None]:
            index = np.unravel_index(k, shape) if shape else ()
            original = x[index].copy()
            x[index] = original + delta
            try:  # copy the outputs before restoring: an output may be a view of the input
                return [
                    np.array(o, copy=True) if want else None for o, want in zip(_outputs(fn, tuple(inputs)), outputs)
                ]
            finally:
                x[index] = original

        return evaluate

    def pullback(self, func, inputs, outputs, diff_positions, output_positions, create_graph=False):
        """The hand-written VJP, given one grad-output per float/complex output: the cotangents
        where asked (None: undefined, as the VJP accepts), zeros elsewhere."""
        fn = _require(func)
        differentiable = [i for i, o in enumerate(outputs) if _is_float_or_complex(o)]
        slots = [differentiable.index(p) for p in output_positions]

        def pullback(cotangents):
            grad_outputs = [np.zeros_like(outputs[i]) for i in differentiable]
            for slot, cotangent in zip(slots, cotangents):
                grad_outputs[slot] = cotangent
            return _grads(fn, inputs, grad_outputs, len(diff_positions))

        return pullback

    def pushforward(self, func: Any, inputs: tuple, diff_positions: Sequence[int]):
        fn = _require(func)
        if fn.jvp is None:
            raise EngineCapabilityError(
                "forward-mode checks of a numpy_function need its jvp (numpy_function(..., jvp=...))"
            )
        return lambda tangents: _tangents(fn, inputs, list(tangents))

    def vmap(self, function: Callable, stacked: np.ndarray) -> tuple:
        raise EngineCapabilityError("the numpy engine has no vectorizing map (vmap): batched checks are not available")

    def complex_part(self, value: Any, part: Part) -> Any:
        return _part(value, part)

    def complex_join(self, part_value: np.ndarray, other: np.ndarray, part: Part) -> np.ndarray:
        return part_value + 1j * other if part == Part.REAL else other + 1j * part_value

    def element_rows(self, value: Any) -> None:
        return None  # numpy arrays are dense

    def densify(self, inputs: tuple) -> None:
        return None

    def direction_evaluator(self, func: Any, inputs: tuple, position: int, outputs: Sequence[bool]):
        fn = _require(func)
        original = np.array(inputs[position], copy=True)

        def evaluate(delta: np.ndarray) -> list[np.ndarray | None]:
            moved = list(inputs)
            moved[position] = original + np.asarray(delta).reshape(original.shape)
            return [np.array(o, copy=True) if want else None for o, want in zip(_outputs(fn, tuple(moved)), outputs)]

        return evaluate

    def random_unit_vectors(self, numels: Sequence[int], dtypes: Sequence[np.dtype]) -> list[np.ndarray]:
        return unit_vectors(numels, dtypes)

    def rng_state(self):
        return np.random.get_state()

    def set_rng_state(self, state) -> None:
        np.random.set_state(state)

    def random_normal(self, shapes: Sequence[tuple[int, ...]], dtypes: Sequence[np.dtype]) -> list[np.ndarray]:
        draws = []
        for shape, dtype in zip(shapes, dtypes):
            values = np.random.standard_normal(shape)
            if np.dtype(dtype).kind == "c":
                values = (values + 1j * np.random.standard_normal(shape)) / np.sqrt(2)
            draws.append(np.asarray(values).astype(dtype))
        return draws

    def input_part(self, func: Any, inputs: tuple, part: Part) -> tuple[NumpyFunction, tuple]:
        fn = _require(func)
        positions = tuple(i for i, x in enumerate(inputs) if isinstance(x, np.ndarray) and x.dtype.kind == "c")
        originals = tuple(np.array(inputs[i], copy=True) for i in positions)
        parts = list(inputs)
        for i in positions:
            parts[i] = np.array(np.real(inputs[i]) if part == Part.REAL else np.imag(inputs[i]), copy=True)
        split = _InputPart(fn, positions, originals, part)
        jvp = (
            None
            if fn.jvp is None
            else _InputPartJVP(split, tuple(p for p, x in enumerate(inputs) if fn.differentiable(p, x)))
        )
        return NumpyFunction(split, None, jvp, fn.argnums), tuple(parts)

    def grad_function(self, func: Any, inputs: tuple, grad_outputs: tuple) -> tuple[Any, tuple]:
        fn = _require(func)
        if not isinstance(fn.vjp, NumpyFunction):
            raise EngineCapabilityError(
                "gradgradcheck of a numpy function needs its vjp to be a distcheck.numpy_function "
                "of (*inputs, *grad_outputs) with a vjp of its own"
            )
        return fn.vjp, tuple(inputs) + tuple(grad_outputs)

    def random_grad_outputs(self, outputs: Sequence[np.ndarray], noncontiguous: bool) -> tuple:
        made = []
        for o in outputs:
            values = np.random.uniform(-1, 1, size=o.shape)
            if o.dtype.kind == "c":
                values = values + 1j * np.random.uniform(-1, 1, size=o.shape)
            g = values.astype(o.dtype)
            if noncontiguous and g.size > 1:
                wide = np.zeros(g.shape[:-1] + (2 * g.shape[-1],), dtype=g.dtype) if g.ndim else g
                wide[..., ::2] = g
                g = wide[..., ::2]
            made.append(g)
        return tuple(made)

    def format_block(self, block: np.ndarray) -> str:
        return np.array2string(block, threshold=1000, edgeitems=3)
