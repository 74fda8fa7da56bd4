"""Finite differences that stay on the input's device (a GPU): columns kept as tensors and
stacked once per block. Checked on the CPU by routing CPU tensors through the device path,
against the usual path: the same verdicts and the same Jacobian numbers."""

from __future__ import annotations

import pytest
import torch

import distcheck
from distcheck.engines import torch_perturb


class _Wrong(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.cos() * 1.01


CASES = {
    "real": (lambda x, y: (x * y.exp()).sum(0), (torch.float64, torch.float64)),
    "complex": (lambda x, y: x * y.sin(), (torch.complex128, torch.complex128)),
    "mixed": (lambda x, y: torch.polar(x.abs() + 1, y), (torch.float64, torch.float64)),
}


def _inputs(dtypes):
    g = torch.Generator().manual_seed(0)
    return tuple(torch.rand(3, 4, dtype=d, generator=g).requires_grad_() for d in dtypes)


@pytest.mark.parametrize("fast_mode", [False, True])
@pytest.mark.parametrize("name", sorted(CASES))
def test_device_path_gives_the_same_verdicts(name, fast_mode, monkeypatch):
    func, dtypes = CASES[name]
    usual = distcheck.gradcheck(func, _inputs(dtypes), fast_mode=fast_mode)
    with monkeypatch.context() as m:
        m.setattr(torch_perturb, "on_device", lambda t: True)
        m.setattr(torch_perturb, "_element_view", lambda data: None)
        m.setattr(torch_perturb, "_direction_view", lambda data: None)
        moved = distcheck.gradcheck(func, _inputs(dtypes), fast_mode=fast_mode)
    assert usual is moved is True


@pytest.mark.parametrize("fast_mode", [False, True])
def test_device_path_reports_a_wrong_gradient_with_the_same_numbers(fast_mode, monkeypatch):
    x = torch.linspace(0.1, 0.9, 5, dtype=torch.float64).requires_grad_()
    with pytest.raises(distcheck.GradcheckError) as usual:
        distcheck.gradcheck(_Wrong.apply, (x,), fast_mode=fast_mode)
    with monkeypatch.context() as m:
        m.setattr(torch_perturb, "on_device", lambda t: True)
        m.setattr(torch_perturb, "_element_view", lambda data: None)
        m.setattr(torch_perturb, "_direction_view", lambda data: None)
        with pytest.raises(distcheck.GradcheckError) as moved:
            distcheck.gradcheck(_Wrong.apply, (x,), fast_mode=fast_mode)
    assert str(moved.value) == str(usual.value)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("fast_mode", [False, True])
@pytest.mark.parametrize("name", sorted(CASES))
def test_cuda_tensors_get_torchs_verdicts(name, fast_mode):
    func, dtypes = CASES[name]
    inputs = tuple(x.detach().cuda().requires_grad_() for x in _inputs(dtypes))
    ours = distcheck.gradcheck(func, inputs, fast_mode=fast_mode)
    theirs = torch.autograd.gradcheck(func, inputs, fast_mode=fast_mode)
    assert ours == theirs
    assert distcheck.gradgradcheck(func, inputs, fast_mode=fast_mode) == torch.autograd.gradgradcheck(
        func, inputs, fast_mode=fast_mode
    )
