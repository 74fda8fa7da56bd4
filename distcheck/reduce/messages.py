"""Failure messages: the reference's wording, plus where and by how much the check failed."""

from __future__ import annotations

import numpy as np

from distcheck.numerics.compare import close_mask, worst_element

FAILED_NONDET_NOTE = """
NOTE: If your op relies on non-deterministic operations, this failure might be expected:
pass `nondet_tol=<tol>` to gradcheck/gradgradcheck (for an OpInfo-based test, set the
OpInfo's `gradcheck_nondet_tol`)."""


def _index(flat: int, shape: tuple[int, ...]) -> str:
    if not shape:
        return "()"
    return str(tuple(int(i) for i in np.unravel_index(flat, shape)))


def _value(x: complex) -> str:
    return f"{x:.6g}"


def mismatch(
    format_block,
    analytical: np.ndarray,
    numerical: np.ndarray,
    output_index: int,
    input_index: int,
    *,
    rtol: float,
    atol: float,
    input_shape: tuple[int, ...],
    output_shape: tuple[int, ...],
    part: str | None = None,
    mode: str = "",
    element: str = "outputs",
) -> str:
    """``Jacobian mismatch for output i with respect to input j`` with both blocks, then the
    worst element (input and output indices), the difference and the tolerance."""
    word = {"imag": "imaginary"}.get(part, part)
    prefix = f"While considering the {word} part of complex {element} only, " if part else ""
    text = (
        f"{prefix}Jacobian {mode}mismatch for output {output_index:d} with respect to input {input_index:d},\n"
        f"numerical:{format_block(numerical)}\nanalytical:{format_block(analytical)}\n"
    )
    worst = worst_element(analytical, numerical, rtol, atol)
    if worst is not None:
        outside = int((~close_mask(analytical, numerical, rtol, atol)).sum())
        text += (
            f"\nLargest violation: input {input_index} element {_index(worst.row, input_shape)} "
            f"(Jacobian row {worst.row}), output {output_index} element {_index(worst.column, output_shape)} "
            f"(column {worst.column}): analytical {_value(worst.actual)}, numerical {_value(worst.expected)}, "
            f"|difference| {worst.difference:.3g} > allowed {worst.allowed:.3g} "
            f"(atol {atol:g} + rtol {rtol:g}·|numerical|); {outside} of {analytical.size} elements outside "
            f"the tolerance.\n"
        )
    return text


def not_reentrant(nondet_tol: float, input_index: int, difference: float) -> str:
    return (
        "Backward is not reentrant, i.e., running backward with same input and grad_output multiple "
        "times gives different values, although analytical gradient matches numerical gradient."
        f"The tolerance for nondeterminism was {nondet_tol}. (Largest difference between two runs: "
        f"{difference:.3g}, for input {input_index}.)" + FAILED_NONDET_NOTE
    )
