"""The library's gradient checks as a distcheck suite (registered as ``example-functions``).

Samples draw from torch's global RNG, which distcheck seeds: every process gets the same ones.
"""

from __future__ import annotations

import torch

from distcheck.suites.declare import Op, declare_suite
from distcheck_example_functions.functions import Cube, Hypot, MatMulAdd, RoundSTE, ScaledTanh


def tensors(dtype, count=1):
    """Samples of ``count`` inputs of a few shapes (a scalar, a vector, a matrix)."""
    for shape in ((), (5,), (3, 4)):
        yield tuple(torch.randn(shape, dtype=dtype, requires_grad=True) for _ in range(count))


def scaled(dtype):
    yield from tensors(dtype, 2)
    yield torch.randn(3, 4, dtype=dtype, requires_grad=True), torch.randn(4, dtype=dtype, requires_grad=True)


def away_from_zero(dtype):
    for x, y in tensors(dtype, 2):
        yield x.detach().abs().add(0.5).requires_grad_(), y


def matrices(dtype):
    for m, k, n in ((2, 3, 4), (1, 5, 1)):
        shapes = ((m, k), (k, n), (m, n))
        yield tuple(torch.randn(shape, dtype=dtype, requires_grad=True) for shape in shapes)


def off_half(dtype):
    """Values away from .5, where round jumps (finite differences would straddle a jump)."""
    yield (torch.randn(6, dtype=dtype) * 3).round().add(0.25).requires_grad_()


STE = "straight-through estimator: the backward passes the gradient through round() on purpose"

suite = declare_suite(
    "example-functions",
    [
        Op("cube", Cube.apply, tensors, dtypes=("float64", "complex128")),
        Op("scaled_tanh", ScaledTanh.apply, scaled),
        Op("hypot", Hypot.apply, away_from_zero),
        Op("matmul_add", MatMulAdd.apply, matrices, dtypes=("float64", "complex128"), checks=("grad",)),
        Op("round_ste", RoundSTE.apply, off_half, xfail={"*": STE}),
    ],
)
