"""Comparisons between Jacobian blocks, with ``torch.allclose``'s semantics, over numpy arrays."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def promote(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both arrays in their common dtype (``torch.promote_types``'s choice for float/complex)."""
    dtype = np.result_type(a.dtype, b.dtype)
    return a.astype(dtype, copy=False), b.astype(dtype, copy=False)


def close_mask(actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """Element-wise ``|actual - expected| <= atol + rtol·|expected|`` as torch.isclose computes it.

    Equal values (including equal infinities) are close; NaN is never close; the tolerance is
    computed in the arrays' own dtype; rtol multiplies the expected (numerical) side.
    """
    actual, expected = promote(np.asarray(actual), np.asarray(expected))
    with np.errstate(invalid="ignore", over="ignore"):
        close = actual == expected
        if rtol == 0 and atol == 0:
            return close
        allowed = atol + np.abs(rtol * expected)
        error = np.abs(actual - expected)
        return close | (np.isfinite(error) & (error <= allowed))


def agrees(actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> bool:
    """Every element of ``actual`` within ``atol + rtol·|expected|`` of ``expected``, or equal
    to it (NaN where both are NaN too): two computations of the same values that may differ in
    their last bits."""
    actual, expected = promote(np.asarray(actual), np.asarray(expected))
    close = close_mask(actual, expected, rtol, atol)
    return bool((close | (np.isnan(actual) & np.isnan(expected))).all())


_BLOCK = 1 << 17  # elements compared at a time: temporaries stay in cache, no full-size copies


def _row_blocks(a: np.ndarray, b: np.ndarray):
    """Matching slices of two arrays of one shape, about ``_BLOCK`` elements each, along the
    axis that keeps them cheap to read: the first, or the last for Fortran-ordered arrays
    (an analytical block is the transpose of the rows its backward passes wrote)."""
    if a.ndim >= 2 and a.flags.f_contiguous and not a.flags.c_contiguous:
        a, b = a.T, b.T
    if a.ndim == 0:
        a, b = a.reshape(1), b.reshape(1)
    step = max(1, _BLOCK // max(1, a[0].size if a.shape[0] else 1))
    for start in range(0, a.shape[0], step):
        yield a[start : start + step], b[start : start + step]


def allclose(actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> bool:
    """``close_mask(...).all()``, block by block: a cheap test first (``|a - e| <= allowed`` with
    a finite allowance implies close), the exact mask only for a block that fails it. Most
    comparisons (every one of a fast-mode check) are small: one block, without slicing."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape:
        raise ValueError(f"cannot compare blocks of shapes {actual.shape} and {expected.shape}")
    if actual.dtype != expected.dtype:
        actual, expected = promote(actual, expected)
    with np.errstate(invalid="ignore", over="ignore"):
        if actual.size <= _BLOCK:
            return _block_close(actual, expected, rtol, atol)
        return all(_block_close(a, e, rtol, atol) for a, e in _row_blocks(actual, expected))


def _block_close(a: np.ndarray, e: np.ndarray, rtol: float, atol: float) -> bool:
    allowed = np.abs(rtol * e)
    allowed += atol
    if (np.abs(a - e) <= allowed).all() and np.isfinite(allowed).all():
        return True
    return bool(close_mask(a, e, rtol, atol).all())


def max_abs_difference(a: np.ndarray, b: np.ndarray) -> float:
    """``max |a - b|`` (0 for empty blocks). NaN propagates, as in torch's ``max``: the
    reference's ``max > tol`` test is then False, so a NaN never fails a reentrancy check."""
    if a.size == 0:
        return 0.0
    if a.dtype != b.dtype:
        a, b = promote(a, b)
    with np.errstate(invalid="ignore"):
        if a.size <= _BLOCK:
            return float(np.max(np.abs(a - b)))
        return float(np.max([np.max(np.abs(x - y)) for x, y in _row_blocks(a, b)]))


@dataclass(frozen=True)
class WorstElement:
    """Where two Jacobian blocks differ most, for failure messages."""

    row: int  # input element (flat)
    column: int  # output element (flat)
    actual: complex
    expected: complex
    difference: float
    allowed: float


def excess(actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float):
    """``(excess, error, allowed)`` element-wise, in float64: by how much each element's
    difference exceeds its tolerance (inf where the difference is NaN). Both arrays promoted."""
    actual, expected = promote(actual, expected)
    with np.errstate(invalid="ignore", over="ignore"):
        error = np.abs(actual - expected).astype(np.float64)
        allowed = (atol + np.abs(rtol * expected)).astype(np.float64)
        return np.where(np.isnan(error), np.inf, error - allowed), error, allowed


def worst_element(actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> WorstElement | None:
    """The element that violates the tolerance the most (or the largest difference if none does)."""
    found = worst_candidate(actual, expected, rtol, atol)
    return None if found is None else found[1]


def worst_candidate(
    actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float
) -> tuple[float, WorstElement] | None:
    """:func:`worst_element` with its excess (NaN possible: ``argmax`` picks the first NaN)."""
    if actual.size == 0:
        return None
    actual, expected = promote(actual, expected)
    over, error, allowed = excess(actual, expected, rtol, atol)
    flat = int(np.argmax(over))
    row, column = np.unravel_index(flat, actual.shape) if actual.ndim == 2 else (flat, 0)
    a, e = actual.reshape(-1)[flat], expected.reshape(-1)[flat]
    worst = WorstElement(
        int(row), int(column), _scalar(a), _scalar(e), float(error.reshape(-1)[flat]), float(allowed.reshape(-1)[flat])
    )
    return float(over.reshape(-1)[flat]), worst


def _scalar(x) -> complex:
    return complex(x) if np.iscomplexobj(x) else float(x)


def adjusted_atol(atol: float, u_sums: tuple[float, ...], v_sum: float | None) -> float:
    """atol for a projected comparison ``vᵀ A u`` vs ``vᵀ B u``: scaled by ``sum(u)·sum(v)``.

    A complex input has two real vectors (real and imaginary directions): their sums add.
    """
    return atol * float(sum(u_sums)) * (1.0 if v_sum is None else float(v_sum))
