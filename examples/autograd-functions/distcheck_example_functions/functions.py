"""Custom ``torch.autograd.Function``s with hand-written backward passes: what a library of
kernels looks like to distcheck. Each backward is written in differentiable torch operations,
so that second derivatives (gradgradcheck) work too."""

from __future__ import annotations

import torch


class Cube(torch.autograd.Function):
    """``z ** 3``; for complex ``z`` the gradient is ``grad * conj(3 z²)`` (PyTorch's convention)."""

    @staticmethod
    def forward(ctx, z):
        ctx.save_for_backward(z)
        return z * z * z

    @staticmethod
    def backward(ctx, grad):
        (z,) = ctx.saved_tensors
        return grad * (3 * z * z).conj()


class ScaledTanh(torch.autograd.Function):
    """``scale * tanh(x)``, differentiable in both."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x, scale)
        return scale * torch.tanh(x)

    @staticmethod
    def backward(ctx, grad):
        x, scale = ctx.saved_tensors
        t = torch.tanh(x)
        grad_scale = (grad * t).sum_to_size(scale.shape)
        return grad * scale * (1 - t * t), grad_scale


class Hypot(torch.autograd.Function):
    """``sqrt(x² + y²)`` (inputs away from the origin, where it is not differentiable)."""

    @staticmethod
    def forward(ctx, x, y):
        r = torch.sqrt(x * x + y * y)
        ctx.save_for_backward(x, y)
        return r

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        r = torch.sqrt(x * x + y * y)
        return grad * x / r, grad * y / r


class MatMulAdd(torch.autograd.Function):
    """``a @ b + c``."""

    @staticmethod
    def forward(ctx, a, b, c):
        ctx.save_for_backward(a, b)
        return a @ b + c

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad @ b.mT.conj(), a.mT.conj() @ grad, grad


class RoundSTE(torch.autograd.Function):
    """``round(x)`` with a straight-through backward (the gradient passes unchanged), as in
    quantization-aware training. Known failure: the backward is on purpose not the derivative
    of ``round`` (zero almost everywhere), so gradient checks fail."""

    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, grad):
        return grad
