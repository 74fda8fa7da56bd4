"""tensorplay's messages: torch's, saying what tensorplay's backward did (its own convention
for undefined grads, the largest wrong value, its missing vmap batching rules), and why its
forward mode cannot be checked."""

from __future__ import annotations

import re

import numpy as np
import tensorplay as tp

from distcheck.engines.base import TensorInfo
from distcheck.engines.wording import UNDEFINED_NONZERO, UNDEFINED_RAISED, Wording
from distcheck.errors import EngineCapabilityError

NO_FORWARD_AD = (
    "tensorplay {version} has no forward-mode AD that distcheck can check: "
    "tensorplay.autograd.forward_ad.make_dual returns a Python DualTensor that is not a tensorplay.Tensor "
    "(tensorplay ops such as tensorplay.sin reject it, and only a few arithmetic methods propagate tangents), "
    "and tensorplay.func.jvp is computed from the reverse-mode graph by double backward, not from forward-mode "
    "derivative formulas (it silently returns zero tangents for ops without a double backward, such as tanh, "
    "sigmoid and relu). Checking it would only re-check the backward pass. {what} needs forward-mode AD: "
    "pass {flag}=False for tensorplay functions."
)

BATCHED_GRAD_NOTE = """gradcheck or gradgradcheck failed while testing batched gradient computation: the
backward pass computed for a batch of grad-outputs in one tensorplay.func.vmap call differs from
separate calls, or vmap could not run it. To skip this test pass check_batched_grad=False. The usual
cause is an operation in the backward formula that has no batching rule in tensorplay ("Kernel not
found for op: ... on backend: VmapCPU")."""


# torch's wording (tensorplay follows the same convention: an undefined grad means zeros)
_UNDEFINED_NOTES = (
    'Please look at "Notes about undefined output gradients" in "tools/autograd/derivatives.yaml" '
    "(PyTorch's; tensorplay follows the same convention: an undefined grad-output stands for zeros)"
)


class TensorplayWording(Wording):
    """tensorplay's messages: torch's, saying what tensorplay's backward did (its own convention
    for undefined grads, the largest wrong value, its missing vmap batching rules)."""

    def zero_grad_nonzero(self, position: int, values: np.ndarray) -> str:
        return super().zero_grad_nonzero(position, values) + _largest(values)

    def grad_type(self, grad: TensorInfo, value: TensorInfo, position: int) -> str:
        hint = ""
        if grad.is_complex and not value.is_complex:
            hint = ": tensorplay did not reduce the complex gradient of a real input to its real part"
        kinds = f"{grad.dtype_name} for differentiable input {position} of {value.dtype_name}"
        return f"grad is incorrect type ({kinds}{hint})"

    def grad_size(self, grad: TensorInfo, value: TensorInfo, position: int) -> str:
        return f"grad is incorrect size ({grad.shape} for differentiable input {position} of {value.shape})"

    def undefined_raised(self, label: str, error: Exception) -> str:
        detail = f"With {label}, tensorplay's backward raised {type(error).__name__}: {error}"
        return f"{UNDEFINED_RAISED} {_UNDEFINED_NOTES}. {detail}"

    def undefined_nonzero(self, label: str, position: int, values: np.ndarray) -> str:
        detail = f"tensorplay's backward gave differentiable input {position} a nonzero gradient{_largest(values)}"
        return f"{UNDEFINED_NONZERO} {_UNDEFINED_NOTES}. With {label}, {detail}"

    def batched_note(self, forward: bool) -> str:
        return BATCHED_GRAD_NOTE

    def batched_error(self, error: Exception, forward: bool) -> str:
        return (
            f"While computing batched gradients, got: {type(error).__name__}: {error}{_missing_kernel(error)}"
            f"\n\n{BATCHED_GRAD_NOTE}"
        )

    def missing(self, error: Exception, what: str, flag: str) -> Exception:
        return EngineCapabilityError(NO_FORWARD_AD.format(version=tp.__version__, what=what, flag=flag))


def _largest(values: np.ndarray) -> str:
    return f" (largest |value| {np.max(np.abs(values)):.3g})"


def _missing_kernel(error: Exception) -> str:
    """A hint naming the op that has no vmap batching rule, when that is what failed."""
    match = re.search(
        r"Kernel not found for op: (\S+) on backend: Vmap|No native batch rule registered for (\S+)", str(error)
    )
    if match is None:
        return ""
    return f" (tensorplay has no batching rule for {match.group(1) or match.group(2)}, which this backward pass uses)"
