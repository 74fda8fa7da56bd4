"""Custom torch autograd Functions with deliberately wrong (or fragile) derivatives."""

from __future__ import annotations

import torch


class WrongScale(torch.autograd.Function):
    """sin with a backward 1% too large."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos() * 1.01


class OneWrongElement(torch.autograd.Function):
    """x * 2 whose gradient is wrong at flat element 3 only."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        grad = g * 2
        grad.view(-1)[3] = grad.view(-1)[3] * 1.5
        return grad


class Transposed(torch.autograd.Function):
    """x @ a for square x, with a backward that uses a instead of a.T."""

    @staticmethod
    def forward(ctx, x, a):
        ctx.save_for_backward(x, a)
        return x @ a

    @staticmethod
    def backward(ctx, g):
        x, a = ctx.saved_tensors
        return g @ a, x.t() @ g


class NoisyBackward(torch.autograd.Function):
    """exp with a nondeterministic backward (noise ~1e-9·grad per call)."""

    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y + 1e-9 * torch.rand_like(y) * g


class NoUndefinedGrad(torch.autograd.Function):
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


class MissingConjugate(torch.autograd.Function):
    """z * w for complex z, w whose backward forgets the conjugates."""

    @staticmethod
    def forward(ctx, z, w):
        ctx.save_for_backward(z, w)
        return z * w

    @staticmethod
    def backward(ctx, g):
        z, w = ctx.saved_tensors
        return g * w, g * z


class WrongSecondOutput(torch.autograd.Function):
    """(x², x³) whose backward for the second output is wrong."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**2, x**3

    @staticmethod
    def backward(ctx, g1, g2):
        (x,) = ctx.saved_tensors
        return g1 * 2 * x + g2 * 2 * x**2


class _CubeGrad(torch.autograd.Function):
    """g·3x² whose own derivative (used by double backward) is wrong in x."""

    @staticmethod
    def forward(ctx, x, g):
        ctx.save_for_backward(x, g)
        return g * 3 * x**2

    @staticmethod
    def backward(ctx, gg):
        x, g = ctx.saved_tensors
        return gg * g * 5 * x, gg * 3 * x**2  # d/dx should be 6·g·x


class WrongSecondOrder(torch.autograd.Function):
    """x³: first derivative right, second derivative wrong."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _CubeGrad.apply(x, g)


class IgnoresZeroGrad(torch.autograd.Function):
    """sin whose backward adds 1 when the whole grad-output is zero: right Jacobian, but a
    zero grad-output gives a nonzero grad."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos() + (g == 0).all().to(g.dtype)


class WrongRealToComplex(torch.autograd.Function):
    """x ↦ x·(1+2j) whose backward uses c instead of conj(c)."""

    @staticmethod
    def forward(ctx, x):
        return x * (1 + 2j)

    @staticmethod
    def backward(ctx, g):
        return (g * (1 + 2j)).real


class WrongImaginaryPart(torch.autograd.Function):
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


class WrongSecondInput(torch.autograd.Function):
    """x * y with a wrong gradient for y only."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g * y, g * x * 0.9


def threshold_select(x):
    """Output shape changes when an element at the threshold is perturbed."""
    return x[x > 0.5] * 2


def raises_value_error(x):
    raise ValueError("user function failed")


class WrongJvp(torch.autograd.Function):
    """sin with a right backward and a wrong forward-mode derivative (jvp 2× too large)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.x = x
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos()

    @staticmethod
    def jvp(ctx, t):
        return 2 * t * ctx.x.cos()


class RightJvp(torch.autograd.Function):
    """sin with right backward and jvp."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.x = x
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos()

    @staticmethod
    def jvp(ctx, t):
        return t * ctx.x.cos()


class ItemInBackward(torch.autograd.Function):
    """x * 3 whose backward calls .item(): right gradients, but it breaks under vmap."""

    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, g):
        scale = torch.tensor(3.0, dtype=g.dtype).item()
        return g * scale + 0 * g.sum().item()


class SmallErrorEverywhere(torch.autograd.Function):
    """exp whose gradient is off by 2e-5 in every element: each element is within the slow
    tolerance (atol 1e-5 + rtol 1e-3·|J|) only for large enough |J|; projections add up."""

    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (y + 4e-3 * y.abs())


class ItemInJvp(torch.autograd.Function):
    """x * 3 whose jvp calls .item(): right tangents, but it breaks under vmap."""

    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, g):
        return g * 3

    @staticmethod
    def jvp(ctx, t):
        return t * torch.tensor(3.0, dtype=t.dtype).item() + 0 * t.sum().item()


class _SquareGrad(torch.autograd.Function):
    """g·2x with a right backward and a wrong jvp (forward-over-reverse is wrong)."""

    @staticmethod
    def forward(ctx, x, g):
        ctx.save_for_backward(x, g)
        ctx.primal = (x, g)
        return g * 2 * x

    @staticmethod
    def backward(ctx, gg):
        x, g = ctx.saved_tensors
        return gg * 2 * g, gg * 2 * x

    @staticmethod
    def jvp(ctx, tx, tg):
        x, g = ctx.primal
        return 3 * (tg * x + g * tx)  # should be 2·(...)


class WrongForwardOverReverse(torch.autograd.Function):
    """x²: right first and second derivatives in reverse mode, wrong forward-over-reverse."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.x = x
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _SquareGrad.apply(x, g)

    @staticmethod
    def jvp(ctx, t):
        return 2 * ctx.x * t


class _ItemGrad(torch.autograd.Function):
    """g·2x whose own backward calls .item(): breaks batched second derivatives."""

    @staticmethod
    def forward(ctx, x, g):
        ctx.save_for_backward(x, g)
        return g * 2 * x

    @staticmethod
    def backward(ctx, gg):
        x, g = ctx.saved_tensors
        two = torch.tensor(2.0, dtype=gg.dtype).item() + 0 * gg.sum().item()
        return gg * two * g, gg * two * x


class ItemInDoubleBackward(torch.autograd.Function):
    """x² whose double backward breaks under vmap."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _ItemGrad.apply(x, g)
