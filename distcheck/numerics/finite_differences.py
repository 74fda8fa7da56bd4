"""Finite-difference Jacobian columns, as pure functions over numpy arrays.

An engine supplies ``evaluate(flat_index, delta)``: the function's outputs (numpy copies, or
an engine's arrays on a device, e.g. torch tensors on a GPU) with element ``flat_index`` of one
input replaced by ``x[flat_index] + delta``, the input restored afterwards. Everything else
here is arithmetic, which both kinds of array do alike; device columns are stacked into a
block (and copied to the host) once per block.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import numpy as np

# evaluate(flat_index, delta) -> one array per output (None for outputs that are not checked)
Evaluate = Callable[[int, complex], Sequence[np.ndarray | None]]


class PerturbationChangedOutput(AssertionError):
    """The function returned outputs of another shape or dtype when an input was perturbed."""


def central_difference(minus: np.ndarray, plus: np.ndarray, eps: float) -> np.ndarray:
    """``(f(x + eps·d) - f(x - eps·d)) / (2·eps)``, flattened, in the outputs' dtype (numpy
    arrays, or an engine's arrays on their device)."""
    return ((plus - minus) / (2 * eps)).reshape(-1)


# Where a perturbation was ("on index (0, 2) "), for messages: a string, or a function that
# formats it (only called when a message needs it: formatting an index per column costs).
Where = str | Callable[[], str]


def _text(where: Where) -> str:
    return where() if callable(where) else where


def _check_same_kind(minus, plus, eps, where: Where) -> None:
    if minus.shape != plus.shape:
        raise PerturbationChangedOutput(
            f"Expected `func` to return outputs with the same shape when inputs are perturbed "
            f"{_text(where)}by {eps}, but got: shapes {minus.shape} and {plus.shape}."
        )
    if minus.dtype != plus.dtype:
        raise PerturbationChangedOutput(
            f"Expected `func` to return outputs with the same dtype when inputs are perturbed "
            f"{_text(where)}by {eps}, but got: dtypes {minus.dtype} and {plus.dtype}."
        )


def directional_derivative(
    evaluate_at: Callable[[object], Sequence[np.ndarray | None]], delta, eps: float, where: Where = ""
) -> list[np.ndarray | None]:
    """Central difference of every checked output along one perturbation ``delta`` (a scalar
    for one element, an array for a whole input): ``(f(x + delta) - f(x - delta)) / (2·eps)``."""
    minus = evaluate_at(-delta)
    plus = evaluate_at(delta)
    columns: list[np.ndarray | None] = []
    for m, p in zip(minus, plus):
        if m is None:
            columns.append(None)
            continue
        _check_same_kind(m, p, eps, where)
        columns.append(central_difference(m, p, eps))
    return columns


def wirtinger_derivative(
    evaluate_at: Callable[[object], Sequence[np.ndarray | None]],
    real_delta,
    imag_delta,
    eps: float,
    where: Where = "",
) -> list[np.ndarray | None]:
    """The derivative along ``real_delta``; for a complex input (``imag_delta`` given, an
    imaginary perturbation) the conjugate Wirtinger combination ``ds/dx + 1j·ds/dy``."""
    ds_dx = directional_derivative(evaluate_at, real_delta, eps, where)
    if imag_delta is None:
        return ds_dx
    ds_dy = directional_derivative(evaluate_at, imag_delta, eps, where)
    return [None if dx is None else dx + dy * 1j for dx, dy in zip(ds_dx, ds_dy)]


def jacobian_column(
    evaluate: Evaluate, flat_index: int, eps: float, input_is_complex: bool, where: Where = ""
) -> list[np.ndarray | None]:
    """One numerical Jacobian column: d outputs / d input[flat_index].

    A complex input is perturbed along 1 and along 1j and the two real derivatives are
    combined into the conjugate Wirtinger derivative ``ds/dx + 1j·ds/dy``.
    """
    return wirtinger_derivative(
        lambda delta: evaluate(flat_index, delta), eps, eps * 1j if input_is_complex else None, eps, where
    )


def jacobian_columns(
    evaluate: Evaluate,
    flat_indices: Sequence[int],
    eps: float,
    input_is_complex: bool,
    output_sizes: Sequence[int | None],
    dtypes: Sequence[np.dtype | None],
    describe_index: Callable[[int], str] = lambda k: "",
    stack: Callable[[list], np.ndarray] | None = None,
) -> list[np.ndarray | None]:
    """Columns ``flat_indices`` of the numerical Jacobian, one block per output.

    Block ``o`` has shape ``(len(flat_indices), output_sizes[o])``: row r is the derivative of
    output o with respect to input element ``flat_indices[r]`` (the layout of
    ``torch.autograd.gradcheck``'s Jacobians: input elements down, output elements across).
    Columns that ``evaluate`` returns as device arrays (not numpy) stay on the device until
    ``stack`` (the engine's: a list of flat columns -> a numpy block) makes each block.
    """
    first = None  # column 0, evaluated first to see what kind of arrays the columns are
    if stack is not None and len(flat_indices):
        first = jacobian_column(
            evaluate, flat_indices[0], eps, input_is_complex, _where(describe_index, flat_indices[0])
        )
        if any(c is not None and not isinstance(c, np.ndarray) for c in first):
            return _stacked(
                evaluate, flat_indices, eps, input_is_complex, output_sizes, dtypes, describe_index, stack, first
            )
    blocks = [
        None if size is None else np.zeros((len(flat_indices), size), dtype=dtype)
        for size, dtype in zip(output_sizes, dtypes)
    ]
    for row, k in enumerate(flat_indices):
        if row == 0 and first is not None:
            column = first
        else:
            column = jacobian_column(evaluate, k, eps, input_is_complex, _where(describe_index, k))
        for block, values, size in zip(blocks, column, output_sizes):
            if block is None:
                continue
            if values.size != size:
                raise PerturbationChangedOutput(
                    f"Expected `func` to return outputs with {size} elements when inputs are "
                    f"perturbed {describe_index(k)}by {eps}, but got {values.size}."
                )
            block[row] = values
    return blocks


def _where(describe_index: Callable[[int], str], k: int) -> Where:
    return functools.partial(describe_index, k)


def _stacked(evaluate, flat_indices, eps, input_is_complex, output_sizes, dtypes, describe_index, stack, first):
    """:func:`jacobian_columns` of device columns: kept where they are, stacked per block."""
    columns: list[list] = [[] for _ in output_sizes]
    for row, k in enumerate(flat_indices):
        column = (
            first
            if row == 0
            else jacobian_column(evaluate, k, eps, input_is_complex, functools.partial(describe_index, k))
        )
        for kept, values, size in zip(columns, column, output_sizes):
            if size is None:
                continue
            if math.prod(values.shape) != size:
                raise PerturbationChangedOutput(
                    f"Expected `func` to return outputs with {size} elements when inputs are "
                    f"perturbed {describe_index(k)}by {eps}, but got {math.prod(values.shape)}."
                )
            kept.append(values)
    return [
        None if size is None else np.asarray(stack(kept), dtype=dtype).reshape(len(flat_indices), size)
        for kept, size, dtype in zip(columns, output_sizes, dtypes)
    ]
