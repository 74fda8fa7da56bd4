"""Custom tensorplay autograd Functions, correct and deliberately wrong, for the tensorplay engine's
tests. Each one mirrors a torch Function (in tests/parity/torch_functions.py, or at the end of this
file for those that file lacks) so that torch's verdict on the twin is the expected verdict.
"""

from __future__ import annotations

import numpy as np
import tensorplay as tp
import torch


class WrongScale(tp.autograd.Function):
    """sin with a backward 1% too large."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos() * 1.01


class OneWrongElement(tp.autograd.Function):
    """x * 2 whose gradient is wrong (×1.5) at flat element 3 only."""

    @staticmethod
    def forward(ctx, x):
        factor = np.full(tuple(x.shape), 2.0)
        factor.reshape(-1)[3] = 3.0
        ctx.factor = tp.tensor(factor)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * ctx.factor


class Transposed(tp.autograd.Function):
    """x @ a for square x, with a backward that uses a instead of a.T."""

    @staticmethod
    def forward(ctx, x, a):
        ctx.save_for_backward(x, a)
        return x @ a

    @staticmethod
    def backward(ctx, g):
        x, a = ctx.saved_tensors
        return g @ a, x.t() @ g


class NoisyBackward(tp.autograd.Function):
    """exp with a nondeterministic backward (noise ~1e-9·grad per call, from numpy's global RNG)."""

    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y + 1e-9 * tp.tensor(np.random.rand(*tuple(y.shape))) * g


class NoisyComplexBackward(tp.autograd.Function):
    """z * 2 for complex z with a nondeterministic backward (noise ~1e-6·grad per call)."""

    @staticmethod
    def forward(ctx, z):
        return z * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2 + 1e-6 * tp.tensor(np.random.rand(*tuple(g.shape))) * g


class NoUndefinedGrad(tp.autograd.Function):
    """tanh whose backward raises when its grad-output is undefined (None)."""

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        y = x.tanh()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        if g is None:
            raise RuntimeError("this backward cannot handle undefined grads")
        return g * (1 - y * y)


class MissingConjugate(tp.autograd.Function):
    """z * w for complex z, w whose backward forgets the conjugates."""

    @staticmethod
    def forward(ctx, z, w):
        ctx.save_for_backward(z, w)
        return z * w

    @staticmethod
    def backward(ctx, g):
        z, w = ctx.saved_tensors
        return g * w, g * z


class WrongSecondOutput(tp.autograd.Function):
    """(x², x³) whose backward for the second output is wrong."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**2, x**3

    @staticmethod
    def backward(ctx, g1, g2):
        (x,) = ctx.saved_tensors
        return g1 * 2 * x + g2 * 2 * x**2


class _CubeGrad(tp.autograd.Function):
    """g·3x² whose own derivative (used by double backward) is wrong in x."""

    @staticmethod
    def forward(ctx, x, g):
        ctx.save_for_backward(x, g)
        return g * 3 * x**2

    @staticmethod
    def backward(ctx, gg):
        x, g = ctx.saved_tensors
        return gg * g * 5 * x, gg * 3 * x**2  # d/dx should be 6·g·x


class WrongSecondOrder(tp.autograd.Function):
    """x³: first derivative right, second derivative wrong."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _CubeGrad.apply(x, g)


class IgnoresZeroGrad(tp.autograd.Function):
    """sin whose backward adds 1 when the whole grad-output is zero: right Jacobian, but the
    backward is not multiplied by grad_output."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos() + (g == 0).all().to(g.dtype)


class ComplexIgnoresZeroGrad(tp.autograd.Function):
    """z * 3 for complex z whose backward adds 1 when the whole grad-output is zero."""

    @staticmethod
    def forward(ctx, z):
        return z * 3

    @staticmethod
    def backward(ctx, g):
        return g * 3 + (g == 0).all().to(g.dtype)


class RealToComplex(tp.autograd.Function):
    """x ↦ x·(1+2j), correct: the gradient of the real input is Re(conj(c)·g)."""

    @staticmethod
    def forward(ctx, x):
        return x * (1 + 2j)

    @staticmethod
    def backward(ctx, g):
        return (g * (1 - 2j)).real


class WrongRealToComplex(tp.autograd.Function):
    """x ↦ x·(1+2j) whose backward uses c instead of conj(c)."""

    @staticmethod
    def forward(ctx, x):
        return x * (1 + 2j)

    @staticmethod
    def backward(ctx, g):
        return (g * (1 + 2j)).real


class WrongImaginaryPart(tp.autograd.Function):
    """exp(z) whose gradient is right for the real part of the output only."""

    @staticmethod
    def forward(ctx, z):
        y = z.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g.real * y.conj()


class WrongSecondInput(tp.autograd.Function):
    """x * y with a wrong gradient for y only."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g * y, g * x * 0.9


class ComplexTimesReal(tp.autograd.Function):
    """z * x for complex z and real x, correct (the real input's gradient is real)."""

    @staticmethod
    def forward(ctx, z, x):
        ctx.save_for_backward(z, x)
        return z * x

    @staticmethod
    def backward(ctx, g):
        z, x = ctx.saved_tensors
        return g * x, (g * z.conj()).real


class WrongRealInputOfComplex(tp.autograd.Function):
    """z * x for complex z and real x whose gradient for the real input x is 10% off."""

    @staticmethod
    def forward(ctx, z, x):
        ctx.save_for_backward(z, x)
        return z * x

    @staticmethod
    def backward(ctx, g):
        z, x = ctx.saved_tensors
        return g * x, (g * z.conj()).real * 1.1


# torch twins of the Functions above that tests/parity/torch_functions.py does not have


class TorchNoisyComplexBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z):
        return z * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2 + 1e-6 * torch.rand(g.shape, dtype=torch.float64) * g


class TorchComplexIgnoresZeroGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z):
        return z * 3

    @staticmethod
    def backward(ctx, g):
        return g * 3 + (g == 0).all().to(g.dtype)


class TorchRealToComplex(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * (1 + 2j)

    @staticmethod
    def backward(ctx, g):
        return (g * (1 - 2j)).real


class TorchComplexTimesReal(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z, x):
        ctx.save_for_backward(z, x)
        return z * x

    @staticmethod
    def backward(ctx, g):
        z, x = ctx.saved_tensors
        return g * x, (g * z.conj()).real


class TorchWrongRealInputOfComplex(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z, x):
        ctx.save_for_backward(z, x)
        return z * x

    @staticmethod
    def backward(ctx, g):
        z, x = ctx.saved_tensors
        return g * x, (g * z.conj()).real * 1.1
