"""Stages: the comparisons of a plan, in the order the reference applies them.

A stage names the units whose results it needs (by index into ``Plan.units``) and the
metadata the reducer needs to judge them and to word a failure.
"""

from __future__ import annotations

from dataclasses import dataclass

from distcheck.plan.units import InputSlot


@dataclass(frozen=True)
class OutputInfo:
    """A differentiable output of the checked function variant."""

    position: int  # among all the function's outputs
    shape: tuple[int, ...]
    was_complex: bool  # a real or imaginary part of a complex output of the user's function


@dataclass(frozen=True)
class JacobianComparison:
    """Numerical vs analytical (backward-mode) Jacobians of one variant, element-wise.

    ``numerical[i]`` lists the column units of differentiable input i, in column order;
    ``analytical[k]`` the row units of differentiable output k, in row order.
    """

    variant: str
    inputs: tuple[InputSlot, ...]
    outputs: tuple[OutputInfo, ...]
    numerical: tuple[tuple[int, ...], ...]
    analytical: tuple[tuple[int, ...], ...]
    part: str | None = None  # "real" / "imag": which part of complex outputs is checked


@dataclass(frozen=True)
class ZeroNumericalJacobian:
    """A function without differentiable outputs: its numerical Jacobian must be zero."""

    variant: str
    numerical: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class Auxiliary:
    """An auxiliary check unit: passes or raises."""

    unit: int


Stage = JacobianComparison | ZeroNumericalJacobian | Auxiliary
