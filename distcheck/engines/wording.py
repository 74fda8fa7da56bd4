"""The messages of the engine-neutral checks, in torch's words: the hook where a library words
things its own way.

The checks (:mod:`distcheck.engines.checks`) decide *whether* something failed; an engine's
:class:`Wording` says *how* it reads. The defaults are torch.autograd.gradcheck's messages (with
distcheck's additions in parentheses: which input, which undefined grad-output); an engine
subclasses :class:`Wording` where its users read something else (tensorplay's own conventions,
numpy's hand-written VJPs). Values passed in are the engine's own arrays (printed as the
engine prints them) or :class:`~distcheck.engines.base.TensorInfo` records.
"""

from __future__ import annotations

from typing import Any

import numpy as np

UNDEFINED_RAISED = "Expected backward function to handle undefined output grads."
UNDEFINED_NONZERO = "Expected all input grads to be undefined or zero when all output grads are undefined or zero."
UNDEFINED_NOTES = 'Please look at "Notes about undefined output gradients" in "tools/autograd/derivatives.yaml"'

BATCHED_GRAD_NOTE = """gradcheck or gradgradcheck failed while testing batched gradient computation: the
backward pass computed for a batch of grad-outputs in one vmap call differs from separate calls,
or vmap could not run it. To skip this test pass check_batched_grad=False (for an OpInfo-based
test: check_batched_grad=False and/or check_batched_gradgrad=False). The usual cause is a
vmap-incompatible operation in the backward formula: see "NOTE: [How to write vmap-compatible
backward formulas]" in PyTorch."""

BATCHED_FORWARD_GRAD_NOTE = """gradcheck failed while testing batched gradient computation with forward-mode
AD (enabled by check_batched_forward_grad=True): the JVPs computed for a batch of tangents in one
vmap call differ from separate calls, or vmap could not run them. To skip this test pass
check_batched_forward_grad=False (for an OpInfo-based test: check_batched_forward_grad=False)."""


class Wording:
    """torch's messages for the auxiliary checks. Methods returning ``str | None`` return None
    for "not a failure of the check: let the exception through"."""

    no_inputs = "no Tensors requiring grad found in input"

    # -- zero grad-output ------------------------------------------------------------------------

    def zero_grad_nonzero(self, position: int, values: np.ndarray) -> str:
        return (
            f"backward not multiplied by grad_output: a zero grad_output gave a nonzero "
            f"gradient for differentiable input {position}"
        )

    def grad_type(self, grad: Any, value: Any, position: int) -> str:
        """``grad``/``value``: TensorInfo of the gradient and of its input."""
        return f"grad is incorrect type ({grad.dtype_name} for an input of {value.dtype_name})"

    def grad_device(self, grad: Any, value: Any, position: int) -> str:
        return f"grad is incorrect device ({grad.device} for an input on {value.device})"

    def grad_size(self, grad: Any, value: Any, position: int) -> str:
        return f"grad is incorrect size ({grad.shape} for an input of {value.shape})"

    # -- undefined grad-outputs -------------------------------------------------------------------

    def undefined_raised(self, label: str, error: Exception) -> str | None:
        """Backward raised with undefined grad-outputs (``label`` says which were undefined)."""
        if not isinstance(error, RuntimeError):
            return None
        return f"{UNDEFINED_RAISED} {UNDEFINED_NOTES} (backward raised, with {label}: {type(error).__name__}: {error})"

    def undefined_nonzero(self, label: str, position: int, values: np.ndarray) -> str:
        return f"{UNDEFINED_NONZERO} {UNDEFINED_NOTES} (nonzero grad for differentiable input {position}, with {label})"

    def undefined_tangent(self, index: int, position: int, value: Any, got: Any, expected: Any) -> str:
        """A zero tangent and an absent tangent on differentiable input ``position`` (the engine
        array ``value``) gave different tangents of output ``index`` (engine arrays)."""
        return (
            f"Mismatch in tangent values for output with index: {index} when input: "
            f"{value} has an undefined tangent value. Got: {got} but expected: {expected} "
            f"(differentiable input {position}: a zero tangent and an absent tangent must give "
            f"the same output tangents)"
        )

    # -- batched gradients ------------------------------------------------------------------------

    def batched_note(self, forward: bool) -> str:
        return BATCHED_FORWARD_GRAD_NOTE if forward else BATCHED_GRAD_NOTE

    def batched_error(self, error: Exception, forward: bool) -> str | None:
        """vmap raised ``error`` while running the batched VJPs (JVPs)."""
        if not isinstance(error, RuntimeError):
            return None
        return f"While computing batched gradients, got: {error}\n\n{self.batched_note(forward)}"

    def batched_mismatch(self, output: int, position: int, got: str, expected: str, forward: bool) -> str:
        """``got``/``expected``: the stacked gradients, formatted by the engine."""
        note = self.batched_note(forward)
        return f"For output {output} and input {position}:\n\n{note}\n\nGot:\n{got}\n\nExpected:\n{expected}"

    # -- missing capabilities ----------------------------------------------------------------------

    def missing(self, error: Exception, what: str, flag: str) -> Exception:
        """The error to raise when the engine lacks what a check needs (``error``, raised by a
        primitive); ``what`` names the check, ``flag`` the option that turns it off."""
        return error
