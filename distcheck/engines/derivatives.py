"""Jacobian rows and columns on an engine's pullback / pushforward primitives, as numpy.

What the analytical units call: one pullback (or pushforward) per unit, then one call of it per
row (column), the grad-output (tangent) a one-hot array or a given vector.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from distcheck.engines.reference import reference_call

if TYPE_CHECKING:
    from distcheck.engines.base import Engine


def diff_inputs(engine: Engine, func: Callable, inputs: tuple) -> list[int]:
    """Positions of the inputs that require gradients."""
    return [i for i, x in enumerate(inputs) if engine.requires_grad(x, func, i)]


def diff_outputs(engine: Engine, outputs: tuple) -> list[int]:
    """Positions of the outputs that are differentiated (those requiring gradients)."""
    return [p for p, o in enumerate(outputs) if engine.requires_grad(o)]


def float_outputs(engine: Engine, outputs: tuple) -> list[int]:
    """Positions of the float/complex outputs (those a pushforward gives tangents for)."""
    return [p for p, o in enumerate(outputs) if engine.is_tensor(o) and engine.info(o).is_float_or_complex]


def one_hot(engine: Engine, like: Any, shape: tuple[int, ...], dtype: np.dtype, index: int) -> Any:
    """An engine array shaped like ``like``, one at flat ``index``, zero elsewhere."""
    values = np.zeros(shape, dtype=dtype)
    values.reshape(-1)[index] = 1
    return engine.from_numpy(values, like=like)


def _as_numpy(engine: Engine, values: Sequence[Any]) -> list[np.ndarray | None]:
    return [None if v is None else engine.to_numpy(v) for v in values]


def row_vjp(
    engine: Engine, func: Callable, inputs: tuple, output_position: int, diff_positions: Sequence[int]
) -> Callable[[int | np.ndarray], list[np.ndarray | None]]:
    """Jacobian rows: ``vjp(g)`` gives the gradients (numpy) of ``outputs[output_position]`` for
    grad-output ``g`` (an int j: one-hot at flat element j; an array: the whole grad-output),
    one per input at ``diff_positions`` (None where unused). The reference call's graph, one
    pullback, a call per row."""
    outputs = reference_call(engine, func, inputs)
    output = outputs[output_position]
    pullback = engine.pullback(func, inputs, outputs, list(diff_positions), [output_position])
    info = engine.info(output)
    given: list = [None, None]  # the last grad-output array and its engine array: rows run twice

    def vjp(g: int | np.ndarray) -> list[np.ndarray | None]:
        if isinstance(g, (int, np.integer)):
            cotangent = one_hot(engine, output, info.shape, info.dtype, int(g))
        else:
            if given[0] is not g:
                given[:] = [g, engine.from_numpy(np.asarray(g).reshape(info.shape), like=output)]
            cotangent = given[1]
        return _as_numpy(engine, pullback([cotangent]))

    return vjp


def column_jvp(
    engine: Engine, func: Callable, inputs: tuple, diff_positions: Sequence[int]
) -> Callable[[int, int | np.ndarray], list[np.ndarray | None]]:
    """Jacobian columns: ``jvp(k, t)`` gives the output tangents (numpy; one per float/complex
    output, None where it has none) for tangent ``t`` on differentiable input ``k`` (index into
    ``diff_positions``; an int t: one-hot at that flat element) and zero tangents elsewhere: one
    pushforward, a call per column."""
    pushforward = engine.pushforward(func, inputs, list(diff_positions))
    infos = [engine.info(inputs[p], func, p) for p in diff_positions]
    wrt = [inputs[p] for p in diff_positions]

    def jvp(k: int, tangent: int | np.ndarray) -> list[np.ndarray | None]:
        tangents = [engine.from_numpy(np.zeros(i.shape, i.dtype), like=x) for i, x in zip(infos, wrt)]
        x = wrt[k]
        if isinstance(tangent, (int, np.integer)):
            tangents[k] = one_hot(engine, x, infos[k].shape, infos[k].dtype, int(tangent))
        else:
            tangents[k] = engine.from_numpy(np.asarray(tangent).reshape(infos[k].shape), like=x)
        return _as_numpy(engine, pushforward(tangents))

    return jvp
