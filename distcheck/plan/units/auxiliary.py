"""Auxiliary checks: the engine's pass/raise checks beyond the Jacobian comparison."""

from __future__ import annotations

from dataclasses import dataclass

from distcheck.engines import Engine
from distcheck.plan.subject import Subject


@dataclass(frozen=True)
class AuxiliaryCheck:
    """One auxiliary check on a variant; passes or raises.

    ``check`` is one of ``zero_grad_output``, ``undefined_grad``, ``undefined_forward_grad``
    (tangents: ``vectors``), ``batched_grad`` (of output ``index``, grad-outputs ``vectors``),
    ``batched_forward_grad`` (on input ``index``, tangents ``vectors``).
    """

    variant: str
    check: str
    masked: bool = False
    index: int = 0
    vectors: tuple[str, ...] = ()

    size = 1

    def run(self, engine: Engine, subject: Subject) -> None:
        variant = subject.variants[self.variant]
        func, inputs = variant.func, variant.inputs
        vectors = [subject.data[key] for key in self.vectors]
        if self.check == "zero_grad_output":
            engine.check_zero_grad_output(func, inputs, self.masked)
        elif self.check == "undefined_grad":
            engine.check_undefined_grad(func, inputs)
        elif self.check == "undefined_forward_grad":
            engine.check_undefined_forward_grad(func, inputs, vectors)
        elif self.check == "batched_grad":
            engine.check_batched_grad(func, inputs, self.index, vectors)
        elif self.check == "batched_forward_grad":
            engine.check_batched_forward_grad(func, inputs, self.index, vectors)
        else:
            raise ValueError(f"unknown auxiliary check {self.check!r}")
