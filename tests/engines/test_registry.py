"""The engine of a check: the library of the inputs that require gradients; values of other
libraries pass through untouched, as torch.autograd.gradcheck hands them to the function."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import distcheck
from distcheck.engines import engine_for, engine_of, get_engine

tp = pytest.importorskip("tensorplay")


def _x(n: int = 3) -> torch.Tensor:
    return torch.linspace(0.1, 0.9, n, dtype=torch.float64).requires_grad_()


def _both(func, inputs, **kwargs) -> tuple[bool, bool]:
    return torch.autograd.gradcheck(func, inputs, **kwargs), distcheck.gradcheck(func, inputs, **kwargs)


@pytest.mark.parametrize(
    "func",
    [lambda a, b: a, lambda a, b: a * torch.from_numpy(b), lambda a, b: (a.sin() * float(b.sum()), a.cos())],
    ids=["identity", "numpy_factor", "two_outputs"],
)
@pytest.mark.parametrize("kwargs", [{}, {"fast_mode": True}, {"check_forward_ad": True, "check_batched_grad": True}])
def test_a_numpy_array_next_to_torch_tensors_is_a_constant_as_in_torch(func, kwargs):
    b = np.linspace(1.0, 2.0, 3)
    before = b.copy()
    assert _both(func, (_x(), b), **kwargs) == (True, True)
    np.testing.assert_array_equal(b, before)


def test_a_wrong_gradient_is_still_caught_next_to_a_numpy_constant():
    class Doubled(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * torch.from_numpy(b)

        @staticmethod
        def backward(ctx, g):
            return 2 * g, None

    inputs = (_x(), np.ones(3))
    with pytest.raises(RuntimeError, match="Jacobian mismatch"):  # torch's GradcheckError
        torch.autograd.gradcheck(Doubled.apply, inputs)
    with pytest.raises(distcheck.GradcheckError, match="Jacobian mismatch"):
        distcheck.gradcheck(Doubled.apply, inputs)


def test_gradgradcheck_with_a_numpy_constant():
    inputs = (_x(), np.linspace(1.0, 2.0, 3))

    def func(a, b):
        return a.sin() * torch.from_numpy(b)

    assert torch.autograd.gradgradcheck(func, inputs) and distcheck.gradgradcheck(func, inputs)


def test_tensorplay_tensors_with_numpy_and_torch_constants():
    x = tp.tensor(np.linspace(0.1, 0.9, 3)).requires_grad_()
    t = torch.ones(3, dtype=torch.float64)  # a torch tensor that does not require grad
    assert distcheck.gradcheck(lambda a, b, c: a.sin() * tp.tensor(b.copy()), (x, np.full(3, 2.0), t))
    assert engine_for(lambda a, b, c: a, (x, np.ones(3), t)) is get_engine("tensorplay")


def test_a_torch_constant_next_to_a_numpy_function():
    f = distcheck.numpy_function(lambda a, c: a * 3.0, vjp=lambda a, c, g: (None if g is None else 3.0 * g,))
    assert distcheck.gradcheck(f, (np.linspace(0.1, 0.9, 3), torch.ones(3)))


def test_inputs_of_two_engines_that_both_require_gradients_are_a_clear_error():
    y = tp.tensor(np.ones(3)).requires_grad_()
    with pytest.raises(TypeError, match="several engines require gradients: tensorplay, torch"):
        distcheck.gradcheck(lambda a, b: a, (_x(), y))


def test_no_input_requiring_gradients_is_torchs_error():
    message = "none of them have requires_grad=True"
    with pytest.raises(ValueError, match=message):
        torch.autograd.gradcheck(lambda a, b: a, (_x().detach(), np.ones(3)))
    with pytest.raises(ValueError, match=message):
        distcheck.gradcheck(lambda a, b: a, (_x().detach(), np.ones(3)))


def test_engine_of_names_the_library_of_an_array():
    assert [engine_of(v) for v in (_x(), np.ones(1), tp.ones((1,)), 1.0, [1.0])] == [
        "torch",
        "numpy",
        "tensorplay",
        None,
        None,
    ]
