"""A Jacobian mismatch carries the compared blocks (``error.blocks``), in slow and fast mode."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import distcheck
from tests.catalogue.torch_functions import MissingConjugate, NoisyBackward
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
    z, w = (torch.randn(2, dtype=torch.complex128, requires_grad=True) for _ in range(2))
    with pytest.raises(distcheck.GradcheckError) as raised:
        distcheck.gradcheck(MissingConjugate.apply, (z, w), fast_mode=False)
    blocks = raised.value.blocks
    assert blocks.part in ("real", "imag") and np.iscomplexobj(blocks.numerical)


def test_other_failures_carry_no_blocks():
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(distcheck.GradcheckError, match="not reentrant") as raised:
        distcheck.gradcheck(NoisyBackward.apply, (x,), fast_mode=False)
    assert not hasattr(raised.value, "blocks")
