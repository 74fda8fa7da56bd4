"""Failure messages: the reference's wording, plus where and by how much the check failed."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from distcheck.kinds import Part
from distcheck.numerics.compare import WorstElement, close_mask, worst_element

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


@dataclass(frozen=True)
class BlockPair:
    """The Jacobian block a mismatch message names: output ``output_index`` against input
    ``input_index`` (their shapes locate the worst element), the tolerances it was compared
    with, the complex part considered (None: a real comparison) and whether forward mode
    computed the analytical side."""

    output_index: int
    input_index: int
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    rtol: float
    atol: float
    part: Part | None = None
    forward: bool = False


def mismatch(format_block, analytical: np.ndarray, numerical: np.ndarray, pair: BlockPair) -> str:
    """``Jacobian mismatch for output i with respect to input j`` with both blocks, then the
    worst element (input and output indices), the difference and the tolerance."""
    worst = worst_element(analytical, numerical, pair.rtol, pair.atol)
    outside = int((~close_mask(analytical, numerical, pair.rtol, pair.atol)).sum()) if analytical.ndim == 2 else 0
    printed = format_block(numerical), format_block(analytical)
    return mismatch_of(*printed, worst, outside, analytical.size, analytical.ndim, pair)


def mismatch_of(
    numerical: str, analytical: str, worst: WorstElement | None, outside: int, size: int, ndim: int, pair: BlockPair
) -> str:
    """:func:`mismatch` from what it needs of the blocks: their prints, the worst element, how
    many elements are outside the tolerance, the size and dimensions of the blocks (a block
    compared tile by tile on the workers never meets the coordinator whole)."""
    output_index, input_index, rtol, atol = pair.output_index, pair.input_index, pair.rtol, pair.atol
    input_shape, output_shape, part = pair.input_shape, pair.output_shape, pair.part
    mode = "computed with forward mode " if pair.forward else ""
    element = "inputs" if pair.forward else "outputs"
    word = "imaginary" if part == Part.IMAG else part
    prefix = f"While considering the {word} part of complex {element} only, " if part else ""
    text = (
        f"{prefix}Jacobian {mode}mismatch for output {output_index:d} with respect to input {input_index:d},\n"
        f"numerical:{numerical}\nanalytical:{analytical}\n"
    )
    if worst is None:
        return text
    tolerance = f"allowed {worst.allowed:.3g} (atol {atol:g} + rtol {rtol:g}·|numerical|)"
    values = (
        f"analytical {_value(worst.actual)}, numerical {_value(worst.expected)}, "
        f"|difference| {worst.difference:.3g} > {tolerance}"
    )
    if ndim == 2:
        return text + (
            f"\nLargest violation: input {input_index} element {_index(worst.row, input_shape)} "
            f"(Jacobian row {worst.row}), output {output_index} element {_index(worst.column, output_shape)} "
            f"(column {worst.column}): {values}; {outside} of {size} elements outside the tolerance.\n"
        )
    if ndim == 1:  # fast forward mode: J·u, one value per output element
        return text + (
            f"\nLargest violation of the projection J·u: output {output_index} element "
            f"{_index(worst.row, output_shape)}: {values} (atol scaled by sum(u)).\n"
        )
    return text + f"\nProjections vᵀJu: {values} (atol scaled by sum(u)·sum(v)).\n"


def not_reentrant(nondet_tol: float, input_index: int, difference: float) -> str:
    return (
        "Backward is not reentrant, i.e., running backward with same input and grad_output multiple "
        "times gives different values, although analytical gradient matches numerical gradient."
        f"The tolerance for nondeterminism was {nondet_tol}. (Largest difference between two runs: "
        f"{difference:.3g}, for input {input_index}.)" + FAILED_NONDET_NOTE
    )


FAST_FAIL_SLOW_OK_NOTE = """Fast gradcheck failed but element-wise differences are small. This means that the
test might've passed in slow_mode! If that is expected for your op, call gradcheck/gradgradcheck
with `fast_mode=False` (for an OpInfo-based test: set the OpInfo's `gradcheck_fast_mode=False`)."""


def slow_mode_explanation(numerical: str, analytical: str, max_difference: float, slow_would_pass: bool) -> str:
    text = (
        "\nThe above quantities relating the numerical and analytical jacobians are computed \n"
        "in fast mode (projections on random vectors). Below, we recompute numerical and analytical "
        "jacobians in slow mode:\n\n"
        f"Numerical:\n {numerical}\nAnalytical:\n{analytical}\n\n"
        f"The max per-element difference (slow mode) is: {max_difference}.\n"
    )
    return text + (FAST_FAIL_SLOW_OK_NOTE if slow_would_pass else "")
