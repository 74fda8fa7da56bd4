"""Auxiliary checks: the engine-neutral pass/raise checks beyond the Jacobian comparison."""

from __future__ import annotations

from dataclasses import dataclass

from distcheck.engines import Engine, checks
from distcheck.kinds import AuxCheck, VariantKey
from distcheck.plan.subject import Subject


@dataclass(frozen=True)
class AuxiliaryCheck:
    """One auxiliary check on a variant; passes or raises.

    ``undefined_forward_grad`` takes tangents (``vectors``); ``batched_grad`` grad-outputs of
    output ``index``, ``batched_forward_grad`` tangents on input ``index`` (``vectors``).
    """

    variant: VariantKey
    check: AuxCheck
    masked: bool = False
    index: int = 0
    vectors: tuple[str, ...] = ()

    size = 1

    def run(self, engine: Engine, subject: Subject) -> None:
        variant = subject.variants[self.variant]
        func, inputs = variant.func, variant.inputs
        vectors = [subject.data[key] for key in self.vectors]
        match self.check:
            case AuxCheck.ZERO_GRAD_OUTPUT:
                checks.check_zero_grad_output(engine, func, inputs, self.masked)
            case AuxCheck.UNDEFINED_GRAD:
                checks.check_undefined_grad(engine, func, inputs)
            case AuxCheck.UNDEFINED_FORWARD_GRAD:
                checks.check_undefined_forward_grad(engine, func, inputs, vectors)
            case AuxCheck.BATCHED_GRAD:
                checks.check_batched_grad(engine, func, inputs, self.index, vectors)
            case AuxCheck.BATCHED_FORWARD_GRAD:
                checks.check_batched_forward_grad(engine, func, inputs, self.index, vectors)
            case _:
                raise ValueError(f"unknown auxiliary check {self.check!r}")
