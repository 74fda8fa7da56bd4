"""Inputs that share a storage: overlapping views of one base, a complex tensor and its real
part. Finite differences perturb one input in place, and the change reaches the others through
the storage: torch's gradcheck fails on such inputs (the numerical Jacobian of one input sees the
others move). Pickled tensor by tensor, each would reach a Ray worker with a storage of its own,
and the check would pass there: they must arrive as views of one storage, and the verdict and
its message be torch's wherever the check runs."""

from __future__ import annotations

import pickle

import pytest
import torch
from ray import cloudpickle
from torch.autograd.gradcheck import GradcheckError

import distcheck
from distcheck.engines.torch_tensors import is_no_grad_view
from distcheck.executors.ray_executor import RayExecutor
from distcheck.plan.subject import Variant


def _overlapping() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(5)
    base = torch.randn(10, dtype=torch.float64)
    return base[:6].requires_grad_(), base[4:].requires_grad_()


def _overlapping_func(a, b):
    return (a.sin().sum() + b.cos().sum()).reshape(1)


def _complex_and_real() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(6)
    base = torch.randn(6, dtype=torch.complex128)
    return base[:4].requires_grad_(), base.real[2:].requires_grad_()  # float64, stride 2, offset 4


def _complex_and_real_func(z, r):
    return (z.abs() ** 2).sum().reshape(1) + r.sin().sum()


CASES = {
    "overlapping views": (_overlapping, _overlapping_func),
    "complex and real part": (_complex_and_real, _complex_and_real_func),
}


def _arrived(inputs: tuple, dumps=cloudpickle.dumps) -> tuple:
    return pickle.loads(dumps(Variant(_overlapping_func, inputs))).inputs


def _layout(t: torch.Tensor) -> tuple:
    return (t.dtype, t.shape, t.stride(), t.storage_offset(), t.requires_grad, t.is_leaf, t.is_conj(), t.is_neg())


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps], ids=["pickle", "cloudpickle"])
@pytest.mark.parametrize("case", CASES)
def test_inputs_that_share_a_storage_arrive_sharing_one(case, dumps):
    inputs = CASES[case][0]()
    arrived = _arrived(inputs, dumps)
    assert [_layout(t) for t in arrived] == [_layout(t) for t in inputs]
    assert all(torch.equal(a, x) for a, x in zip(arrived, inputs))
    storage = arrived[0].untyped_storage()
    assert arrived[1].untyped_storage().data_ptr() == storage.data_ptr() != inputs[0].untyped_storage().data_ptr()
    assert storage.nbytes() == inputs[0].untyped_storage().nbytes()
    with torch.no_grad():
        arrived[0].data[-1] += 1.0  # perturbed as finite differences do: the other input moves
    assert not torch.equal(arrived[1], inputs[1])


def test_views_of_other_dtypes_and_conjugates_keep_sharing():
    base = torch.randn(4, dtype=torch.complex128)
    inputs = (base, torch.view_as_real(base), base.imag, base.conj(), base.conj().imag, base.view(torch.float64))
    arrived = _arrived(inputs)
    assert [_layout(t) for t in arrived] == [_layout(t) for t in inputs]
    assert all(torch.equal(a, x) for a, x in zip(arrived, inputs))
    assert len({t.untyped_storage().data_ptr() for t in arrived}) == 1
    arrived[0].data[0] += 1j
    assert arrived[2][0] == inputs[2][0] + 1 and arrived[4][0] == -(inputs[2][0] + 1)


def test_one_tensor_passed_twice_stays_one_and_others_stay_as_they_were():
    a, b = _overlapping()
    alone = torch.randn(3, dtype=torch.float64, requires_grad=True)
    arrived = _arrived((a, a, b, alone, 2.5, None))
    assert arrived[0] is arrived[1] and arrived[2] is not arrived[0]
    assert arrived[2].untyped_storage().data_ptr() == arrived[0].untyped_storage().data_ptr()
    assert arrived[3].requires_grad and torch.equal(arrived[3], alone) and arrived[4:] == (2.5, None)


@pytest.mark.parametrize("case", CASES)
def test_the_verdict_on_shared_storage_inputs_is_torchs_wherever_it_runs(ray_cluster, case):
    make, func = CASES[case]
    with pytest.raises(GradcheckError, match="Jacobian mismatch for output 0 with respect to input 0"):
        torch.autograd.gradcheck(func, make())
    messages = []
    for executor in ("serial", RayExecutor(local_below=0.0)):  # in-process, on Ray
        with pytest.raises(distcheck.GradcheckError, match="with respect to input 0") as raised:
            distcheck.gradcheck(func, make(), executor=executor)
        messages.append(str(raised.value))
    assert messages[0] == messages[1]


def test_a_no_grad_view_of_another_input_arrives_as_one_sharing_its_storage():
    base = torch.randn(10, dtype=torch.float64, requires_grad=True)
    with torch.no_grad():
        window = base[2:8]  # as OpInfo's istft samples make theirs
    arrived_base, arrived = _arrived((base, window))
    assert is_no_grad_view(arrived) and not is_no_grad_view(arrived_base) and arrived_base.requires_grad
    assert [_layout(t) for t in (arrived_base, arrived)] == [_layout(t) for t in (base, window)]
    assert arrived.untyped_storage().data_ptr() == arrived_base.untyped_storage().data_ptr()
