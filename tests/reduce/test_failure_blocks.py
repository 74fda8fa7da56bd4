"""A Jacobian mismatch carries the compared blocks (``error.blocks``), in slow and fast mode."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import distcheck
from tests.runner.fake_suite import FUNCTIONS


@pytest.mark.parametrize("fast_mode", [False, True])
def test_a_mismatch_carries_the_full_blocks(fast_mode):
    x = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
    with pytest.raises(distcheck.GradcheckError) as raised:
        distcheck.gradcheck(FUNCTIONS["wrong"], (x,), fast_mode=fast_mode)
    blocks = raised.value.blocks
    assert (blocks.output_index, blocks.input_index, blocks.mode, blocks.part) == (0, 0, "backward", None)
    assert blocks.numerical.shape == blocks.analytical.shape == (6, 6)
    expected = np.diag(x.detach().cos().numpy().ravel())
    np.testing.assert_allclose(blocks.numerical, expected, atol=1e-6)
    np.testing.assert_allclose(blocks.analytical, 1.5 * expected, atol=1e-12)
    assert (blocks.atol, blocks.rtol) == (1e-5, 1e-3)


def test_the_part_of_a_complex_output():
    z = torch.randn(2, dtype=torch.complex128, requires_grad=True)

    class Conjugated(torch.autograd.Function):  # the derivative without its conjugation
        @staticmethod
        def forward(ctx, z):
            ctx.save_for_backward(z)
            return z * z

        @staticmethod
        def backward(ctx, grad):
            (z,) = ctx.saved_tensors
            return grad * 2 * z

    with pytest.raises(distcheck.GradcheckError) as raised:
        distcheck.gradcheck(Conjugated.apply, (z,), fast_mode=False)
    blocks = raised.value.blocks
    assert blocks.part in ("real", "imag") and np.iscomplexobj(blocks.numerical)


class _Noisy(torch.autograd.Function):  # a backward that differs from run to run
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2 + 1e-3 * torch.rand_like(grad)


def test_other_failures_carry_no_blocks():
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(distcheck.GradcheckError, match="not reentrant") as raised:
        distcheck.gradcheck(_Noisy.apply, (x,), fast_mode=False)
    assert not hasattr(raised.value, "blocks")
