"""Stages: the comparisons of a plan, in the order the reference applies them.

A stage names the units whose results it needs (by index into ``Plan.units``) and the
metadata the reducer needs to judge them and to word a failure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from distcheck.kinds import Mode, Part, VariantKey
from distcheck.plan.units import InputSlot, Unit


@dataclass(frozen=True)
class OutputInfo:
    """A checked output of the function variant."""

    position: int  # among all the function's outputs
    shape: tuple[int, ...]
    was_complex: bool  # a real or imaginary part of a complex output of the user's function


@dataclass(frozen=True)
class JacobianComparison:
    """Numerical vs analytical Jacobians of one variant, element by element (slow mode).

    ``numerical[i]`` lists the column units of differentiable input i. Backward mode:
    ``analytical[k]`` lists the row units of output k; forward mode: ``analytical[i]`` lists the
    forward column units of input i.
    """

    variant: VariantKey
    mode: Mode
    inputs: tuple[InputSlot, ...]
    outputs: tuple[OutputInfo, ...]
    numerical: tuple[tuple[int, ...], ...]
    analytical: tuple[tuple[int, ...], ...]
    part: Part | None = None  # which part of complex outputs (backward) / inputs (forward)
    input_was_complex: tuple[bool, ...] = ()
    numerical_outputs: tuple[int, int] | None = None  # see ProjectedComparison


@dataclass(frozen=True)
class BatchedComparison:
    """A slow-mode Jacobian comparison (or a check that a numerical Jacobian is zero) whose
    Jacobians are computed in batches (some of its units vectorized, see
    :mod:`distcheck.plan.vectorize`). ``batched`` compares them over the plan's units and
    decides the stage only when it passes clearly: within a fraction of the tolerances (a zero
    Jacobian: exactly zero), its backward reentrant within ``nondet_tol``, every batch's spot
    check agreeing. Otherwise ``exact`` judges the stage as torch does, over ``exact_units``
    (element by element, run only then; ``exact``'s unit indices are positions in ``exact_units``)."""

    batched: JacobianComparison | ZeroNumericalJacobian
    exact: JacobianComparison | ZeroNumericalJacobian
    exact_units: tuple[Unit, ...]


@dataclass(frozen=True)
class ProjectedComparison:
    """Fast mode: Jacobians projected on random vectors, ``vᵀ(J_num u)`` vs ``(vᵀJ_ana)·u``
    (backward) or ``J_num u`` vs ``J_ana u`` (forward), with atol scaled by sum(u)·sum(v).

    ``numerical[i]``: the projection unit of input i; ``analytical``: per output (backward) or
    per input (forward). ``u[i]``: subject.data keys of input i's vector(s); ``v[k]``: output k's.
    ``explain(i, k)``: the slow-mode units (numerical, analytical) of input i and output k, made
    and run only on failure, to show the full Jacobian blocks.

    ``numerical_outputs``: ``(start, stop)`` when the numerical units are shared with the stage
    of the other part of complex outputs (they evaluate :data:`~distcheck.kinds.OUTPUT_PARTS`):
    this stage's outputs are ``start:stop`` of theirs. None: all of them.
    """

    variant: VariantKey
    mode: Mode
    inputs: tuple[InputSlot, ...]
    outputs: tuple[OutputInfo, ...]
    numerical: tuple[int, ...]
    analytical: tuple[int, ...]
    u: tuple[tuple[str, ...], ...]
    v: tuple[str, ...]
    explain: Callable[[int, int], tuple[Unit, Unit]]
    part: Part | None = None
    input_was_complex: tuple[bool, ...] = ()
    numerical_outputs: tuple[int, int] | None = None


@dataclass(frozen=True)
class ZeroNumericalJacobian:
    """A function without differentiable outputs: its numerical derivatives must vanish —
    exactly (slow mode: the Jacobian), or within ``tolerance`` (fast mode: projections)."""

    variant: VariantKey
    numerical: tuple[tuple[int, ...], ...]
    inputs: tuple[InputSlot, ...]  # the inputs perturbed
    tolerance: float | None = None

    @property
    def numels(self) -> tuple[int, ...]:
        """Per input: the rows of its Jacobian."""
        return tuple(s.numel for s in self.inputs)


@dataclass(frozen=True)
class Auxiliary:
    """An auxiliary check unit: passes or raises."""

    unit: int


Stage = JacobianComparison | BatchedComparison | ProjectedComparison | ZeroNumericalJacobian | Auxiliary
