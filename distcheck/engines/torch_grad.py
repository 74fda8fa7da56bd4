"""Vector-Jacobian products through torch's autograd engine.

``torch.autograd.grad`` first validates each grad-output against its output, with ``torch.fx``'s
symbolic shapes; their first use in a process imports them and sympy, which every fresh process's
first check would pay for (docs/engines.md). The pullbacks distcheck makes give plain tensors,
each grad-output made from its output: there that validation cannot fail, and :func:`grad` runs
the engine as ``torch.autograd.grad`` runs it once validated. Anything else (tensor subclasses,
``__torch_function__`` modes, nested tensors, a grad-output unlike its output, a torch without the
engine's entry point) goes through ``torch.autograd.grad`` itself, so that its errors and
dispatch are torch's.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.overrides import has_torch_function

_run_backward = getattr(torch.autograd.graph, "_engine_run_backward", None)


def grad(
    outputs: Sequence[torch.Tensor],
    inputs: Sequence[torch.Tensor],
    grad_outputs: Sequence[torch.Tensor],
    create_graph: bool = False,
) -> tuple[torch.Tensor | None, ...]:
    """``torch.autograd.grad(outputs, inputs, grad_outputs, retain_graph=True,
    create_graph=create_graph, allow_unused=True)``."""
    outputs, inputs, grad_outputs = tuple(outputs), tuple(inputs), tuple(grad_outputs)
    if _run_backward is not None and _direct(outputs, inputs, grad_outputs):
        return _run_backward(outputs, grad_outputs, True, create_graph, inputs, True, accumulate_grad=False)
    return torch.autograd.grad(
        outputs, inputs, grad_outputs, retain_graph=True, create_graph=create_graph, allow_unused=True
    )


def _direct(outputs: tuple, inputs: tuple, grad_outputs: tuple) -> bool:
    """Whether ``torch.autograd.grad`` would only validate and run the engine: plain tensors, no
    ``__torch_function__`` in play, each grad-output of its output's shape and kind (real or
    complex), no nested output."""
    tensors = (*outputs, *inputs, *grad_outputs)
    if len(outputs) != len(grad_outputs) or any(type(t) is not torch.Tensor for t in tensors):
        return False
    if has_torch_function(tensors):
        return False
    return all(
        o.shape == g.shape and o.dtype.is_complex == g.dtype.is_complex and not o.is_nested
        for o, g in zip(outputs, grad_outputs)
    )
