"""Suite torch-opinfo: statuses, flattening, gradcheck options, seeding and fingerprints, as
PyTorch's TestGradients._check_helper has them (torch 2.13)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch.testing._internal.opinfo.core import SampleInput

from distcheck.suites import CaseId, GroupInfo, Selection, UsageError, get_suite
from distcheck.suites.torch_opinfo.calls import FORWARD_AD_UNSUPPORTED, SampleFunction, check_calls, gradcheck_inputs
from distcheck.suites.torch_opinfo.database import op_named
from distcheck.suites.torch_opinfo.fingerprint import fingerprint
from distcheck.suites.torch_opinfo.samples import generate
from distcheck.suites.torch_opinfo.status import checked_dtypes, pytorch_status

F64, C128 = torch.float64, torch.complex128


@pytest.fixture(scope="module")
def suite():
    return get_suite("torch-opinfo")


# -- statuses (PyTorch's decorators and test bodies) -----------------------------------------


@pytest.mark.parametrize(
    ("op", "check", "dtype", "status", "reason"),
    [
        ("add", "grad", F64, "run", ""),
        ("grid_sampler_3d", "grad", F64, "skipped", "Skipped!"),
        ("grid_sampler_3d", "gradgrad", F64, "skipped", "Skipped!"),
        ("cov", "grad", F64, "xfail", "expected failure"),
        ("cov", "fwgrad_bwgrad", F64, "skipped", "Barely fails"),
        ("cdist", "gradgrad", F64, "skipped", "doesn't support gradgrad"),
        ("nn.functional.ctc_loss", "gradgrad", F64, "xfail", "test_fn_gradgrad"),
        ("as_strided", "grad", F64, "skipped", "Numerous errors"),
        ("linalg.pinv.singular", "grad", F64, "skipped", "PYTORCH_TEST_WITH_SLOW"),
        ("istft", "grad", C128, "xfail", "test_fn_grad"),
        ("add", "inplace_grad", F64, "run", ""),
        ("cdist", "inplace_grad", F64, "skipped", "Op has no inplace variant!"),
        ("acosh", "inplace_gradgrad", F64, "skipped", "does not support inplace autograd"),
        ("acosh", "inplace_fwgrad", F64, "skipped", "does not support inplace autograd"),
        ("add", "fail_gradgrad", F64, "skipped", "Operation does support gradgrad"),
        ("cdist", "fail_gradgrad", F64, "run", ""),
        ("NumpyCubeCustomOp", "grad", F64, "run", ""),
    ],
)
def test_pytorch_status(op, check, dtype, status, reason):
    got_status, got_reason = pytorch_status(op_named(op), check, dtype)
    assert got_status == status
    assert reason in got_reason


def test_only_dtypes_with_backward_support():
    assert checked_dtypes(op_named("view_as_real"), (F64, C128)) == [C128]
    assert checked_dtypes(op_named("add"), (F64, C128)) == [F64, C128]


def test_enumeration(suite):
    cases = list(suite.cases(Selection(checks=("grad", "gradgrad"), ops=("add", "cdist"), dtypes=("float64",))))
    add = [c for c in cases if c.id.op == "add"]
    samples = len(generate(op_named("add"), F64, small=False))
    assert [c.key for c in add[:2]] == [
        "torch-opinfo::add::float64::sample0::grad",
        "torch-opinfo::add::float64::sample1::grad",
    ]
    assert len(add) == 2 * samples and all(c.status == "run" and c.fingerprint for c in add)
    cdist_gradgrad = [c for c in cases if c.id.op == "cdist" and c.id.check == "gradgrad"]
    assert [(c.key, c.status) for c in cdist_gradgrad] == [("torch-opinfo::cdist::float64::gradgrad", "skipped")]
    picked = list(suite.cases(Selection(checks=("grad",), ops=("add",), dtypes=("float64",), substring="::sample3::")))
    assert [c.key for c in picked] == ["torch-opinfo::add::float64::sample3::grad"]


def test_each_test_over_its_op_lists(suite):
    """hop_db and custom_op_db ops are cases of grad and gradgrad (custom ops also of
    inplace_grad and fail_gradgrad), never of the forward-mode or in-place gradgrad tests."""
    decided = {
        (c.id.op, c.id.check)
        for c in suite.groups(Selection(ops=("map.simple", "NumpyCubeCustomOp")))
        if not isinstance(c, GroupInfo)
    }
    groups = {
        g.op: g.checks
        for g in suite.groups(Selection(ops=("map.simple", "NumpyCubeCustomOp")))
        if isinstance(g, GroupInfo)
    }
    assert groups == {"map.simple": ("grad", "gradgrad"), "NumpyCubeCustomOp": ("grad", "gradgrad")}
    assert decided == {("NumpyCubeCustomOp", "inplace_grad"), ("NumpyCubeCustomOp", "fail_gradgrad")}


def test_inplace_kinds_leave_out_broadcasting_samples(suite):
    listed = generate(op_named("add"), F64, small=False)
    broadcasting = {k for k, s in enumerate(listed) if s.broadcasts_input}
    assert broadcasting
    cases = list(suite.cases(Selection(checks=("grad", "inplace_grad"), ops=("add",), dtypes=("float64",))))
    indices = {check: {c.id.sample for c in cases if c.id.check == check} for check in ("grad", "inplace_grad")}
    assert indices["grad"] == set(range(len(listed)))
    assert indices["inplace_grad"] == indices["grad"] - broadcasting
    with pytest.raises(LookupError, match="broadcasts"):
        suite.build(CaseId("torch-opinfo", "add", "float64", "inplace_grad", min(broadcasting)))


def test_inplace_variant_on_a_clone(suite):
    case = suite.build(CaseId.parse("torch-opinfo::add::float64::sample0::inplace_grad"))
    assert case.func.inplace and case.expected_error is None
    before = [x.detach().clone() for x in case.inputs]
    out = case.func(*case.inputs)
    assert all(torch.equal(x, b) for x, b in zip(case.inputs, before))  # the leaf is left alone
    assert out.grad_fn is not None and "Add" in type(out.grad_fn).__name__


def test_expected_raises(suite):
    inplace = suite.build(CaseId.parse("torch-opinfo::acosh::float64::sample0::inplace_grad"))
    assert [c.function for c in inplace.calls] == ["call"] and inplace.expected_error.type is Exception
    fail = suite.build(CaseId.parse("torch-opinfo::cdist::float64::sample0::fail_gradgrad"))
    assert fail.expected_error.pattern == r"derivative for .* is not implemented"
    assert [c.function for c in fail.calls] == ["call"]  # the test's loop over every sample
    listed = list(suite.cases(Selection(checks=("fail_gradgrad",), ops=("cdist",), dtypes=("float64",))))
    assert [c.key for c in listed] == ["torch-opinfo::cdist::float64::sample0::fail_gradgrad"]


def test_inplace_fwgrad_batched_option():
    op = op_named("add")
    (kwargs,) = _kwargs("add", "inplace_fwgrad", "fast")
    assert kwargs["check_batched_forward_grad"] is bool(op.check_inplace_batched_forward_grad)
    assert kwargs["check_forward_ad"] and not kwargs["check_backward_ad"]


def test_unknown_names(suite):
    with pytest.raises(UsageError, match="unknown op 'nn.functional.conv7d'"):
        next(suite.cases(Selection(ops=("nn.functional.conv7d",))))
    with pytest.raises(UsageError, match="unknown dtype 'float32'"):
        next(suite.cases(Selection(ops=("add",), dtypes=("float32",))))


# -- samples as gradcheck inputs --------------------------------------------------------------


class _FakeOp:
    full_name = "fake"

    def get_op(self):
        return lambda tensors, weight, *, bias, scale: (torch.stack(tensors) * weight + bias) * scale

    def gradcheck_wrapper(self, op, *args, **kwargs):
        return op(*args, **kwargs)


def _t(*values, grad=True):
    return torch.tensor(values, dtype=torch.float64, requires_grad=grad)


def test_flattening_order_and_recomposition():
    a, b, const = _t(1.0, 2.0), _t(3.0, 4.0), _t(5.0, 6.0, grad=False)
    weight, bias = _t(0.5, 0.5), _t(1.0, 1.0)
    sample = SampleInput([a, const, b], args=(weight,), kwargs={"bias": bias, "scale": 2.0})
    inputs = gradcheck_inputs(sample)
    # the input list's tensors, then the args, then the kwarg values; constants left out
    assert [id(x) for x in inputs] == [id(a), id(b), id(weight), id(bias)]
    fn = SampleFunction(_FakeOp(), sample)
    replaced = [x.detach() * 10 for x in inputs]
    expected = (torch.stack([replaced[0], const, replaced[1]]) * replaced[2] + replaced[3]) * 2.0
    assert torch.equal(fn(*replaced), expected)


def test_output_process_fn_grad_is_applied():
    x = _t(1.0, -2.0)
    sample = SampleInput(x, output_process_fn_grad=lambda out: out.abs())
    op = op_named("neg")
    assert torch.equal(SampleFunction(op, sample)(x), torch.tensor([1.0, 2.0], dtype=torch.float64))


def test_sample_function_pickles_by_op_name():
    from ray import cloudpickle  # what the Ray executor ships a split case's function with

    sample = SampleInput(_t(1.0, 2.0))
    copy = cloudpickle.loads(cloudpickle.dumps(SampleFunction(op_named("sin"), sample)))
    assert copy.op is op_named("sin")
    assert torch.equal(copy(sample.input), sample.input.sin())


# -- gradcheck options per check kind and mode (opinfo.md, section 1) ----------------------------


def _kwargs(op_name, check, mode):
    return [call.kwargs for call in check_calls(op_named(op_name), check, mode)]


def test_grad_options():
    assert _kwargs("add", "grad", "fast") == [
        {
            "check_grad_dtypes": True,
            "nondet_tol": 0.0,
            "fast_mode": True,
            "check_batched_grad": True,
            "check_forward_ad": False,
            "check_backward_ad": True,
            "check_undefined_grad": True,
            "check_batched_forward_grad": False,
        }
    ]
    assert _kwargs("add", "grad", "slow")[0]["fast_mode"] is False
    assert _kwargs("addmm", "grad", "fast")[0]["nondet_tol"] == 1e-12
    assert _kwargs("svd", "grad", "fast")[0]["check_batched_grad"] is False


def test_explicit_fast_mode_beats_the_mode():
    assert _kwargs("cumprod", "grad", "fast")[0]["fast_mode"] is False  # gradcheck_fast_mode=False
    assert _kwargs("addbmm", "grad", "slow")[0]["fast_mode"] is True  # gradcheck_fast_mode=True


def test_forward_ad_options():
    (kwargs,) = _kwargs("add", "fwgrad", "fast")
    assert kwargs["check_forward_ad"] and not kwargs["check_backward_ad"]
    assert kwargs["check_batched_grad"] is False and kwargs["check_undefined_grad"] is True
    assert kwargs["check_batched_forward_grad"] is True
    assert _kwargs("conj", "fwgrad", "fast")[0]["check_batched_forward_grad"] is False


def test_gradgrad_options_two_calls():
    calls = check_calls(op_named("add"), "gradgrad", "fast")
    assert [c.function for c in calls] == ["gradgradcheck", "gradgradcheck"]
    assert [c.kwargs["gen_non_contig_grad_outputs"] for c in calls] == [False, True]
    assert calls[0].kwargs["check_batched_grad"] is True and calls[0].kwargs["check_grad_dtypes"] is True
    assert "check_fwd_over_rev" not in calls[0].kwargs  # gradgradcheck's defaults: rev over rev
    assert _kwargs("qr", "gradgrad", "fast")[0]["check_batched_grad"] is False  # check_batched_gradgrad


def test_fwgrad_bwgrad_options():
    kwargs = _kwargs("add", "fwgrad_bwgrad", "slow")
    assert [k["gen_non_contig_grad_outputs"] for k in kwargs] == [False, True]
    assert kwargs[0]["check_fwd_over_rev"] is True and kwargs[0]["check_rev_over_rev"] is False
    assert kwargs[0]["check_batched_grad"] is False and kwargs[0]["check_undefined_grad"] is False
    assert kwargs[0]["fast_mode"] is False


def test_ops_without_forward_ad_expect_not_implemented(suite):
    case = suite.build(CaseId.parse("torch-opinfo::cdist::float64::sample0::fwgrad"))
    assert case.expected_error == FORWARD_AD_UNSUPPORTED
    assert suite.build(CaseId.parse("torch-opinfo::cdist::float64::sample0::grad")).expected_error is None


# -- seeding and fingerprints ----------------------------------------------------------------


def test_samples_are_deterministic():
    first = [fingerprint(s) for s in generate(op_named("nn.functional.conv2d"), C128, small=False)]
    torch.manual_seed(99)  # whatever the caller did to the global RNG before
    torch.rand(7)
    again = [fingerprint(s) for s in generate(op_named("nn.functional.conv2d"), C128, small=False)]
    assert first == again and len(set(first)) == len(first)


def test_fingerprint_sees_values_strides_and_flags():
    x = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    base = fingerprint(SampleInput(x.clone().requires_grad_(), args=(1,)))
    assert fingerprint(SampleInput(x.clone().requires_grad_(), args=(1,))) == base
    changed = x.clone()
    changed[1, 2] += 1e-12
    assert fingerprint(SampleInput(changed.requires_grad_(), args=(1,))) != base
    assert fingerprint(SampleInput(x.t().contiguous().t().requires_grad_(), args=(1,))) != base  # strides
    assert fingerprint(SampleInput(x.clone(), args=(1,))) != base  # requires_grad
    assert fingerprint(SampleInput(x.clone().requires_grad_(), args=(2,))) != base  # a constant


def test_built_case_matches_enumeration(suite):
    (info,) = suite.cases(
        Selection(checks=("gradgrad",), ops=("linalg.det",), dtypes=("complex128",), substring="sample2:")
    )
    built = suite.build(info.id)
    assert built.fingerprint == info.fingerprint
    assert len(built.calls) == 2 and all(x.requires_grad for x in built.inputs)
    with pytest.raises(LookupError, match="samples"):
        suite.build(CaseId.parse("torch-opinfo::linalg.det::complex128::sample999::grad"))


def test_fingerprints_agree_across_processes(suite):
    """A fresh process (as a Ray worker is) rebuilds bitwise the same inputs."""
    ids = [
        "torch-opinfo::nn.functional.conv2d::float64::sample4::grad",
        "torch-opinfo::addmm::complex128::sample1::grad",
    ]
    code = (
        "import sys; from distcheck.suites import get_suite, CaseId; s = get_suite('torch-opinfo');"
        "print(' '.join(s.build(CaseId.parse(i)).fingerprint for i in sys.argv[1:]))"
    )
    out = subprocess.run([sys.executable, "-c", code, *ids], capture_output=True, text=True, check=True).stdout
    assert out.split() == [suite.build(CaseId.parse(i)).fingerprint for i in ids]


def test_samples_changed_by_a_run_are_generated_afresh(suite):
    """Batch norm updates the running statistics its samples hold: the next case of the same
    sample list must still see them as generated (as each PyTorch test generates its own)."""
    case = CaseId.parse("torch-opinfo::nn.functional.batch_norm::float64::sample0::grad")
    (info,) = suite.cases(Selection(checks=("grad",), ops=(case.op,), dtypes=("float64",), substring="::sample0::"))
    built = suite.build(case)
    built.func(*built.inputs)  # a training-mode batch norm: updates running_mean in place
    again = suite.build(CaseId.parse("torch-opinfo::nn.functional.batch_norm::float64::sample0::gradgrad"))
    assert again.fingerprint == info.fingerprint


def test_seeding_keeps_no_call_stacks_for_backends_this_machine_lacks():
    """Loading op_db makes torch.manual_seed skip formatting the call stack for accelerator
    backends that are not available (its cost grows with the stack's depth); the CPU seed and
    the queued seeds are as before."""
    from distcheck.suites.torch_opinfo.database import op_table
    from distcheck.suites.torch_opinfo.device_seeding import NOTE

    op_table()
    if torch.cuda.is_available():
        pytest.skip("CUDA is available: its seeding is left alone")
    torch.manual_seed(7)
    first = torch.rand(3)
    torch.manual_seed(7)
    assert torch.equal(torch.rand(3), first)
    callback, stack = torch.cuda._lazy_seed_tracker.manual_seed_all_cb
    assert callable(callback) and stack == [NOTE]
