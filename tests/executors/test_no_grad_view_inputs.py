"""An input that is a view made in no-grad mode of a tensor that requires grad (as OpInfo's
istft samples pass ``window[:8]``): it says it requires grad, but autograd records nothing to
it, so torch's gradcheck finds its analytical Jacobian zero and fails. Pickled, it would reach a
Ray worker as an ordinary leaf that gets its gradient, and the check would pass there: it must
arrive as such a view again, and the verdict be torch's wherever the check runs."""

from __future__ import annotations

import pickle

import pytest
import torch
from ray import cloudpickle
from torch.autograd.gradcheck import GradcheckError

import distcheck
from distcheck.check import plan_check
from distcheck.engines.torch_tensors import is_no_grad_view
from distcheck.executors.ray_executor import RayExecutor
from distcheck.executors.serial import SerialExecutor
from distcheck.options import CheckOptions


def _inputs(complex_base: bool) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(3)
    x = torch.randn(8, dtype=torch.float64, requires_grad=True)
    dtype = torch.complex128 if complex_base else torch.float64
    base = (torch.rand(10, dtype=dtype) + 0.5).requires_grad_()
    with torch.no_grad():
        window = base.real[:8] if complex_base else base[:8]  # a view of a longer storage
    return x, window


def _func(x, window):
    return (x * window).sin()


@pytest.mark.parametrize("complex_base", [False, True], ids=["real", "real part of complex"])
def test_a_no_grad_view_arrives_as_one(complex_base):
    x, window = _inputs(complex_base)
    assert window.requires_grad and window.is_leaf and is_no_grad_view(window) and not is_no_grad_view(x)
    _, plan = plan_check(_func, (x, window), CheckOptions(), SerialExecutor())
    arrived_x, arrived = pickle.loads(cloudpickle.dumps(plan.subject)).variants["f"].inputs
    assert is_no_grad_view(arrived) and not is_no_grad_view(arrived_x) and arrived_x.requires_grad
    assert (arrived.stride(), arrived.storage_offset()) == (window.stride(), window.storage_offset())
    assert torch.equal(arrived, window)
    (grad,) = torch.autograd.grad(_func(arrived_x, arrived).sum(), (arrived,), allow_unused=True)
    assert grad is None  # as where it came from


@pytest.mark.parametrize("fast_mode", [False, True], ids=["slow", "fast"])
def test_the_verdict_on_a_no_grad_view_is_torchs_wherever_it_runs(ray_cluster, fast_mode):
    with pytest.raises(GradcheckError, match="Jacobian mismatch"):
        torch.autograd.gradcheck(_func, _inputs(False), fast_mode=fast_mode)
    messages = []
    for threshold in (0.0, 1e9):  # on Ray, in-process
        executor = RayExecutor(local_below=threshold)
        with pytest.raises(distcheck.GradcheckError, match="with respect to input 1") as raised:
            distcheck.gradcheck(_func, _inputs(False), fast_mode=fast_mode, executor=executor)
        messages.append(str(raised.value))
    assert messages[0] == messages[1]
