"""Batched Jacobian blocks, written once on the engine primitives: numerical columns from one
vectorized evaluation of a batch of perturbed inputs per direction, analytical rows from one
vmapped pullback of a batch of one-hot grad-outputs, forward-mode columns from one vmapped
pushforward of a batch of one-hot tangents. Blocks are numpy arrays laid out as the
element-by-element path lays them out; a block computed on a device is copied to the host once.

A function reaches the vectorizing map in a form that it accepts (:func:`vectorizable`): a
callable with a ``vectorizable(inputs)`` method stands for an equivalent of itself there
(gradgradcheck's function, built on autograd's ``grad``, as a function transform).
:func:`function_key` names what a function computes, for remembering how its batches went.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from distcheck.engines.reference import reference_call

if TYPE_CHECKING:
    from distcheck.engines.base import Engine


def vectorizable(func: Callable, inputs: tuple) -> Callable:
    """``func`` in a form the engine's vectorizing map accepts, at ``inputs``."""
    own = getattr(func, "vectorizable", None)
    return func if own is None else own(inputs)


def function_key(func: Callable, _depth: int = 0) -> Hashable | None:
    """What ``func`` computes, stable within a process: the same for another sample of one op
    (a function's code and the callables it closes over, a bound method's function and owner,
    an object's type and printed name, or what a wrapper says of itself with ``batch_key``);
    None when nothing says (an object printed with its address)."""
    own = getattr(func, "batch_key", None)
    if own is not None:
        return own
    method, owner = getattr(func, "__func__", None), getattr(func, "__self__", None)
    if method is not None and owner is not None:  # a bound method: of a class (Function.apply) or an object
        inner = function_key(method, _depth)
        owner_key = owner if isinstance(owner, type) else function_key(owner, _depth)
        return None if inner is None or owner_key is None else ("method", inner, owner_key)
    code = getattr(func, "__code__", None)
    if code is not None:  # a function: its code, and what callables it closes over
        cells = tuple(_cell_key(c, _depth + 1) for c in func.__closure__ or ())
        return code if not cells else (code, cells)
    if isinstance(func, functools.partial):
        inner = function_key(func.func, _depth)
        return None if inner is None else ("partial", inner)
    if type(func).__repr__ is not object.__repr__:
        return type(func), repr(func)
    return None


def reads_elsewhere(engine: Engine, func: Callable, inputs: tuple, position: int) -> bool:
    """Whether ``func`` sees ``inputs[position]`` other than through that argument (a closure over
    it, another input sharing its memory): moving the input as finite differences do (in place,
    for an engine that moves it in place) changes what ``func`` returns when the argument is a
    copy holding the same values. A batch of perturbed copies would not see that dependence; the
    element-by-element path does. The move is 1e-3·(1 + |x|) per element, large enough not to
    vanish in rounding."""
    x = inputs[position]
    info = engine.info(x, func, position)
    copy = engine.from_numpy(engine.to_numpy(x), like=x)
    copy = engine.track(copy) if info.requires_grad else copy
    with_copy = _WithCopy(func, position, copy)
    wanted = [True] * len(engine.call(with_copy, inputs))
    evaluate = engine.direction_evaluator(with_copy, inputs, position, wanted)
    values = engine.to_numpy(x)
    before, after = evaluate(np.zeros_like(values)), evaluate((np.abs(values) + 1) * 1e-3)
    same = (
        host(engine, a) is None or np.array_equal(host(engine, a), host(engine, b), equal_nan=True)
        for a, b in zip(before, after)
    )
    return not all(same)


def host(engine: Engine, value: Any) -> np.ndarray | None:
    """An evaluation's output as numpy (an input on a device gives device outputs)."""
    return value if value is None or isinstance(value, np.ndarray) else engine.to_numpy(value)


class _WithCopy:
    """``func`` with its argument at ``position`` replaced by ``copy``, whatever it is given."""

    def __init__(self, func: Callable, position: int, copy: Any):
        self.func, self.position, self.copy = func, position, copy

    def __call__(self, *args):
        moved = list(args)
        moved[self.position] = self.copy
        return self.func(*moved)


def _cell_key(cell, depth: int) -> Hashable | None:
    """A closure cell's part of its function's key: a callable's key (not deeper than a few
    closures: a function may close over itself), else its type."""
    try:
        value = cell.cell_contents
    except ValueError:  # an empty cell
        return None
    if not callable(value):
        return type(value).__name__
    return function_key(value, depth) if depth < 4 else type(value).__name__


def _stacked(values: np.ndarray, items: Sequence[int], shape: tuple[int, ...]) -> np.ndarray:
    """``len(items)`` copies of the flat ``values``, shaped ``(len(items), *shape)``."""
    return np.repeat(values.reshape(1, -1), len(items), axis=0).reshape((len(items), *shape))


def numerical_block(
    engine: Engine,
    func: Callable,
    inputs: tuple,
    position: int,
    items: Sequence[int],
    eps: float,
    is_complex: bool,
    wanted: Sequence[bool],
    loops: bool = False,
) -> list[np.ndarray | None]:
    """Columns ``items`` of the numerical Jacobian with respect to ``inputs[position]``: per
    wanted output an array ``(len(items), output elements)``, None for the others. Row r is
    ``(f(x + eps·e_k) - f(x - eps·e_k)) / (2·eps)`` for ``k = items[r]``, the perturbed element
    ``x[k] + delta`` computed as the element-by-element path computes it; a complex input
    combines the real and imaginary directions (conjugate Wirtinger). ``loops``: see
    :meth:`Engine.batch_evaluate`."""
    x = inputs[position]
    mapped = vectorizable(func, inputs)
    values = engine.to_numpy(x)
    flat = values.reshape(-1)
    rows, columns = np.arange(len(items)), np.asarray(items, dtype=np.int64)

    def derivative(delta: complex) -> list:
        sides = []
        for sign in (-1, 1):
            moved = _stacked(flat, items, values.shape)
            moved.reshape(len(items), -1)[rows, columns] = flat[columns] + sign * delta
            outputs = engine.batch_evaluate(mapped, inputs, position, engine.from_numpy(moved, like=x), loops=loops)
            sides.append([o if want else None for o, want in zip(outputs, wanted)])
        minus, plus = sides
        return [None if m is None else ((p - m) / (2 * eps)).reshape(len(items), -1) for m, p in zip(minus, plus)]

    blocks = derivative(eps)
    if is_complex:
        blocks = [None if dx is None else dx + dy * 1j for dx, dy in zip(blocks, derivative(eps * 1j))]
    return [None if b is None else engine.to_numpy(b) for b in blocks]


def rows_block(
    engine: Engine,
    func: Callable,
    inputs: tuple,
    output_position: int,
    diff_positions: Sequence[int],
    rows: Sequence[int],
) -> list[np.ndarray]:
    """Rows ``rows`` of the analytical Jacobians of output ``output_position``: per
    differentiable input its gradients for one-hot grad-outputs at those rows, stacked
    ``(len(rows), *gradient shape)`` (zeros for an unused input, as a missing gradient leaves a
    row); the reference call's graph, one vmapped pullback."""
    outputs = reference_call(engine, func, inputs)
    output = outputs[output_position]
    info = engine.info(output)
    wrt = [inputs[p] for p in diff_positions]
    pullback = engine.pullback(func, inputs, outputs, list(diff_positions), [output_position])
    one_hots = np.zeros((len(rows), info.numel), dtype=info.dtype)
    one_hots[np.arange(len(rows)), np.asarray(rows, dtype=np.int64)] = 1

    def vjp(cotangent: Any) -> tuple:
        return tuple(engine.zeros_like(x) if g is None else g for g, x in zip(pullback([cotangent]), wrt))

    stacked = engine.from_numpy(one_hots.reshape((len(rows), *info.shape)), like=output)
    return [engine.to_numpy(g) for g in engine.vmap(vjp, stacked)]


def forward_block(
    engine: Engine, func: Callable, inputs: tuple, diff_positions: Sequence[int], index: int, columns: Sequence[int]
) -> list[np.ndarray]:
    """Columns ``columns`` of the forward-mode Jacobians of differentiable input ``index``: per
    float/complex output its tangents for one-hot tangents at those elements (zero tangents on
    the other inputs), stacked ``(len(columns), *output shape)`` (zeros for an output without a
    tangent); one vmapped pushforward."""
    pushforward = engine.pushforward(func, inputs, list(diff_positions))
    outputs = engine.call(func, inputs)
    primals = [o for o in outputs if engine.is_tensor(o) and engine.info(o).is_float_or_complex]
    wrt = [inputs[p] for p in diff_positions]
    info = engine.info(wrt[index], func, diff_positions[index])
    one_hots = np.zeros((len(columns), info.numel), dtype=info.dtype)
    one_hots[np.arange(len(columns)), np.asarray(columns, dtype=np.int64)] = 1

    def jvp(tangent: Any) -> tuple:
        tangents = [engine.zeros_like(x) for x in wrt]
        tangents[index] = tangent
        return tuple(engine.zeros_like(o) if d is None else d for d, o in zip(pushforward(tangents), primals))

    stacked = engine.from_numpy(one_hots.reshape((len(columns), *info.shape)), like=wrt[index])
    return [engine.to_numpy(t) for t in engine.vmap(jvp, stacked)]
