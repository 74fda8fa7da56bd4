"""The small vocabularies modules exchange, as types: what a Jacobian stage differentiates
(:class:`Mode`), which part of a complex value is checked (:class:`Part`), the auxiliary checks
(:class:`AuxCheck`) and the keys of a check's function variants (:class:`VariantKey`).

All are ``str``-valued, so that they serialize (JSON reports, failure blocks) and compare as the
strings they replace; code builds and dispatches on the types.
"""

from __future__ import annotations

from enum import StrEnum


class Mode(StrEnum):
    """How analytical Jacobians are computed: reverse mode (rows by VJPs) or forward mode
    (columns by JVPs)."""

    BACKWARD = "backward"
    FORWARD = "forward"


class Part(StrEnum):
    """A part of complex values: torch checks a complex output (forward mode: input) as two
    real functions, imaginary part first."""

    REAL = "real"
    IMAG = "imag"

    @property
    def other(self) -> Part:
        return Part.IMAG if self is Part.REAL else Part.REAL


PARTS_IN_TORCH_ORDER = (Part.IMAG, Part.REAL)


class AuxCheck(StrEnum):
    """The auxiliary checks (beyond the Jacobian comparison), in the words of torch's options."""

    ZERO_GRAD_OUTPUT = "zero_grad_output"
    UNDEFINED_GRAD = "undefined_grad"
    UNDEFINED_FORWARD_GRAD = "undefined_forward_grad"
    BATCHED_GRAD = "batched_grad"
    BATCHED_FORWARD_GRAD = "batched_forward_grad"


class VariantKey(str):
    """The key of a function variant in a check's subject: the function itself (``"f"``), the
    part of its complex outputs (``"imag"``) or inputs (``"inputs-imag"``), both parts of its
    complex outputs side by side (``"parts"``, see :data:`OUTPUT_PARTS`), and the twin of a
    variant whose sparse inputs finite differences see fully specified (``"f#dense"``)."""

    __slots__ = ()

    @classmethod
    def of(cls, part: Part | None = None, inputs: bool = False) -> VariantKey:
        if part is None:
            return FUNCTION
        return cls(f"inputs-{part}" if inputs else str(part))

    def densified(self) -> VariantKey:
        return VariantKey(f"{self}#dense")


FUNCTION = VariantKey("f")
# The function's outputs as their imaginary parts, then their real parts (PARTS_IN_TORCH_ORDER):
# one evaluation gives the finite differences of both parts' checks.
OUTPUT_PARTS = VariantKey("parts")
