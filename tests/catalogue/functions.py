"""The catalogue: functions with hand-written derivatives, correct and deliberately wrong, written once.

Each entry is library-neutral math: ``forward(m, *inputs)`` and ``backward(m, inputs, outputs,
*grads)`` are written against a math kit ``m`` (:mod:`tests.catalogue.kits`) that supplies the
library's ops (``m.sin``, ``m.conj``, ...), its randomness (``m.noise``) and how a function with
hand-written derivatives is made in it (a ``torch.autograd.Function``, a tensorplay Function, a
``jax.custom_vjp``). ``backward`` is in torch's convention for complex numbers (conjugate
Wirtinger: the grad-output ``g`` of a holomorphic ``f`` reaches ``z`` as ``g·conj(f'(z))``); the
JAX kit maps it to JAX's. ``jvp(m, inputs, *tangents)`` is the forward-mode derivative.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Custom:
    """A function with hand-written derivatives (one catalogue entry)."""

    doc: str
    forward: Callable
    backward: Callable
    jvp: Callable | None = None
    undefined_grads: bool = False  # the backward sees None for undefined grad-outputs (not zeros)


def _sin(m, x):
    return m.sin(x)


def _exp(m, x):
    return m.exp(x)


def _one_wrong_element(m, inputs, outputs, g):
    factor = np.full(tuple(g.shape), 2.0)
    factor.reshape(-1)[3] = 3.0
    return g * m.array(factor, like=g)


def _raise_on_undefined(m, inputs, outputs, g):
    if g is None:
        raise RuntimeError("this backward cannot handle undefined grads")
    (y,) = outputs
    return g * (1 - y * y)


def _raise_on_second_undefined_alone(m, inputs, outputs, g1, g2):
    """The second grad-output undefined while the first is zero (the undefined-grad check's
    one-at-a-time case) raises; all of them undefined, or the first one nonzero (the Jacobian's
    rows), is fine."""
    (x,) = inputs
    if g2 is None:
        if g1 is not None and m.item(m.all_zero(g1)):
            raise RuntimeError("this backward cannot handle an undefined grad of its second output")
        return None if g1 is None else g1 * m.cos(x)
    return (0 if g1 is None else g1 * m.cos(x)) - g2 * m.sin(x)


def _item_in_jvp(m, inputs, t):
    return t * m.item(m.array(3.0, like=t)) + 0 * m.item(t.sum())


def _item_grad_backward(m, inputs, outputs, gg):
    x, g = inputs
    two = m.item(m.array(2.0, like=gg)) + 0 * m.item(gg.sum())
    return gg * two * g, gg * two * x


CUSTOM = {
    "WrongScale": Custom("sin with a backward 1% too large.", _sin, lambda m, i, o, g: g * m.cos(i[0]) * 1.01),
    "OneWrongElement": Custom(
        "x * 2 whose gradient is wrong (×1.5) at flat element 3 only.", lambda m, x: x * 2, _one_wrong_element
    ),
    "Transposed": Custom(
        "x @ a for square x, with a backward that uses a instead of a.T.",
        lambda m, x, a: x @ a,
        lambda m, i, o, g: (g @ i[1], m.t(i[0]) @ g),
    ),
    "NoisyBackward": Custom(
        "exp with a nondeterministic backward (noise ~1e-9·grad per call).",
        _exp,
        lambda m, i, o, g: g * o[0] + 1e-9 * m.noise(o[0]) * g,
    ),
    "NoisyComplexBackward": Custom(
        "z * 2 for complex z with a nondeterministic backward (noise ~1e-6·grad per call).",
        lambda m, z: z * 2,
        lambda m, i, o, g: g * 2 + 1e-6 * m.noise(g) * g,
    ),
    "VeryNoisyBackward": Custom(
        "exp whose backward adds noise of 1% of the grad: a vmap'd call cannot equal separate ones.",
        _exp,
        lambda m, i, o, g: g * o[0] * (1 + 0.01 * m.noise(o[0])),
    ),
    "NoUndefinedGrad": Custom(
        "tanh whose backward raises when its grad-output is undefined (None).",
        lambda m, x: m.tanh(x),
        _raise_on_undefined,
        undefined_grads=True,
    ),
    "NoUndefinedSecondGrad": Custom(
        "(sin x, cos x) whose backward raises when its second grad-output is undefined and the "
        "first is zero: the all-undefined case passes, the one-at-a-time cases find it.",
        lambda m, x: (m.sin(x), m.cos(x)),
        _raise_on_second_undefined_alone,
        undefined_grads=True,
    ),
    "MissingConjugate": Custom(
        "z * w for complex z, w whose backward forgets the conjugates.",
        lambda m, z, w: z * w,
        lambda m, i, o, g: (g * i[1], g * i[0]),
    ),
    "WrongSecondOutput": Custom(
        "(x², x³) whose backward for the second output is wrong.",
        lambda m, x: (x**2, x**3),
        lambda m, i, o, g1, g2: g1 * 2 * i[0] + g2 * 2 * i[0] ** 2,
    ),
    "CubeGrad": Custom(
        "g·3x² whose own derivative (used by double backward) is wrong in x.",
        lambda m, x, g: g * 3 * x**2,
        lambda m, i, o, gg: (gg * i[1] * 5 * i[0], gg * 3 * i[0] ** 2),  # d/dx should be 6·g·x
    ),
    "WrongSecondOrder": Custom(
        "x³: first derivative right, second derivative wrong.",
        lambda m, x: x**3,
        lambda m, i, o, g: m.function("CubeGrad")(i[0], g),
    ),
    "IgnoresZeroGrad": Custom(
        "sin whose backward adds 1 when the whole grad-output is zero: right Jacobian, but a zero "
        "grad-output gives a nonzero grad.",
        _sin,
        lambda m, i, o, g: g * m.cos(i[0]) + m.all_zero(g),
    ),
    "ComplexIgnoresZeroGrad": Custom(
        "z * 3 for complex z whose backward adds 1 when the whole grad-output is zero.",
        lambda m, z: z * 3,
        lambda m, i, o, g: g * 3 + m.all_zero(g),
    ),
    "RealToComplex": Custom(
        "x ↦ x·(1+2j), correct: the gradient of the real input is Re(conj(c)·g).",
        lambda m, x: x * (1 + 2j),
        lambda m, i, o, g: m.real(g * (1 - 2j)),
    ),
    "WrongRealToComplex": Custom(
        "x ↦ x·(1+2j) whose backward uses c instead of conj(c).",
        lambda m, x: x * (1 + 2j),
        lambda m, i, o, g: m.real(g * (1 + 2j)),
    ),
    "WrongImaginaryPart": Custom(
        "exp(z) whose gradient is right for the real part of the output only.",
        _exp,
        lambda m, i, o, g: m.real(g) * m.conj(o[0]),
    ),
    "WrongRealPart": Custom(
        "exp(z) whose gradient is right for the imaginary part of the output only (torch checks it "
        "first: the real part's check fails, on finite differences shared with the imaginary one).",
        _exp,
        lambda m, i, o, g: 1j * m.imag(g) * m.conj(o[0]),
    ),
    "WrongSecondInput": Custom(
        "x * y with a wrong gradient for y only.",
        lambda m, x, y: x * y,
        lambda m, i, o, g: (g * i[1], g * i[0] * 0.9),
    ),
    "ComplexTimesReal": Custom(
        "z * x for complex z and real x, correct (the real input's gradient is real).",
        lambda m, z, x: z * x,
        lambda m, i, o, g: (g * i[1], m.real(g * m.conj(i[0]))),
    ),
    "WrongRealInputOfComplex": Custom(
        "z * x for complex z and real x whose gradient for the real input x is 10% off.",
        lambda m, z, x: z * x,
        lambda m, i, o, g: (g * i[1], m.real(g * m.conj(i[0])) * 1.1),
    ),
    "WrongJvp": Custom(
        "sin with a right backward and a wrong forward-mode derivative (jvp 2× too large).",
        _sin,
        lambda m, i, o, g: g * m.cos(i[0]),
        jvp=lambda m, i, t: 2 * t * m.cos(i[0]),
    ),
    "RightJvp": Custom(
        "sin with right backward and jvp.",
        _sin,
        lambda m, i, o, g: g * m.cos(i[0]),
        jvp=lambda m, i, t: t * m.cos(i[0]),
    ),
    "ItemInBackward": Custom(
        "x * 3 whose backward calls .item(): right gradients, but it breaks under vmap.",
        lambda m, x: x * 3,
        lambda m, i, o, g: g * m.item(m.array(3.0, like=g)) + 0 * m.item(g.sum()),
    ),
    "SmallErrorEverywhere": Custom(
        "exp whose gradient is off by 4e-3·|J| in every element: each element is within the slow "
        "tolerance (atol 1e-5 + rtol 1e-3·|J|) only for large enough |J|; projections add up.",
        _exp,
        lambda m, i, o, g: g * (o[0] + 4e-3 * m.abs(o[0])),
    ),
    "ItemInJvp": Custom(
        "x * 3 whose jvp calls .item(): right tangents, but it breaks under vmap.",
        lambda m, x: x * 3,
        lambda m, i, o, g: g * 3,
        jvp=_item_in_jvp,
    ),
    "SquareGrad": Custom(
        "g·2x with a right backward and a wrong jvp (forward-over-reverse is wrong).",
        lambda m, x, g: g * 2 * x,
        lambda m, i, o, gg: (gg * 2 * i[1], gg * 2 * i[0]),
        jvp=lambda m, i, tx, tg: 3 * (tg * i[0] + i[1] * tx),  # should be 2·(...)
    ),
    "WrongForwardOverReverse": Custom(
        "x²: right first and second derivatives in reverse mode, wrong forward-over-reverse.",
        lambda m, x: x * x,
        lambda m, i, o, g: m.function("SquareGrad")(i[0], g),
        jvp=lambda m, i, t: 2 * i[0] * t,
    ),
    "ItemGrad": Custom(
        "g·2x whose own backward calls .item(): breaks batched second derivatives.",
        lambda m, x, g: g * 2 * x,
        _item_grad_backward,
    ),
    "ItemInDoubleBackward": Custom(
        "x² whose double backward breaks under vmap.",
        lambda m, x: x * x,
        lambda m, i, o, g: m.function("ItemGrad")(i[0], g),
    ),
}


def threshold_select(x):
    """Output shape changes when an element at the threshold is perturbed."""
    return x[x > 0.5] * 2


def raises_value_error(x):
    raise ValueError("user function failed")
