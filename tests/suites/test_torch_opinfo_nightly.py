"""torch-opinfo against PyTorch's own gradient tests, outcome for outcome: a handful of ops of
each check kind run both ways — PyTorch's way (test methods of our own that call the
``TestGradients`` helpers torch ships, instantiated by torch's ``@ops`` and
``instantiate_device_type_tests``, so that the OpInfos' skips and expected failures apply) and
as distcheck's cases — and the aggregate outcome of each (test, op, dtype) compared. The ops
cover every branch: in-place variants, an op without in-place autograd (add's inplace_grad vs
acosh's), one without gradgrad (cdist: fail_gradgrad), ops without forward AD (cdist,
index_reduce.mean: the forward-mode tests expect a raise), expected failures (cov, and cat, whose
gradgrad sample 5 only torch's gradcheck fails), a hop_db op and a custom_op_db op."""

from __future__ import annotations

import unittest

import pytest
import torch
from torch.testing._internal.common_device_type import OpDTypes, instantiate_device_type_tests, ops
from torch.testing._internal.common_utils import TestGradients

from distcheck.case.judge import distcheck_checker, judge
from distcheck.executors.serial import SerialExecutor
from distcheck.records.case_record import FAIL, PASS, SKIPPED, XFAIL, XPASS
from distcheck.reports.pytorch_junit import aggregate
from distcheck.suites import Selection, get_suite
from distcheck.suites.torch_opinfo.database import op_named
from distcheck.suites.torch_opinfo.pytorch_names import pytorch_test

KINDS = {  # check kind -> ops
    "grad": ("cov", "cond.simple", "NumpyCubeCustomOp", "sinh"),
    "gradgrad": ("cat", "NumpySortCustomOp", "cdist"),
    "fwgrad": ("sinh", "cdist", "index_reduce.mean"),
    "fwgrad_bwgrad": ("sinh", "cdist"),
    "inplace_grad": ("add", "acosh", "cdist"),
    "inplace_gradgrad": ("mul", "acosh"),
    "inplace_fwgrad": ("sub", "acosh", "index_reduce.mean"),
    "fail_gradgrad": ("cdist", "sinh"),
}


NO_FORWARD_AD = "Trying to use forward AD with .* that does not support it"


def _ops(kind):
    return [op_named(name) for name in KINDS[kind]]


_gradcheck_ops = lambda kind: ops(_ops(kind), dtypes=OpDTypes.supported, allowed_dtypes=[torch.double, torch.cdouble])  # noqa: E731


class TestBwdGradients(TestGradients):  # the name the OpInfos' DecorateInfos are keyed by
    @_gradcheck_ops("grad")
    def test_fn_grad(self, device, dtype, op):
        if dtype not in op.supported_backward_dtypes(torch.device(device).type):
            self.skipTest("Skipped! Dtype is not in supported backward dtypes!")
        self._grad_test_helper(device, dtype, op, op.get_op())

    @_gradcheck_ops("inplace_grad")
    def test_inplace_grad(self, device, dtype, op):
        self._skip_helper(op, device, dtype)
        if not op.inplace_variant:
            self.skipTest("Op has no inplace variant!")
        if not op.supports_inplace_autograd:
            inplace = self._get_safe_inplace(op.get_inplace())
            for sample in op.sample_inputs(device, dtype, requires_grad=True):
                if sample.broadcasts_input:
                    continue
                with self.assertRaises(Exception):  # noqa: B017 (PyTorch's test asserts just this)
                    inplace(sample).sum().backward()
        else:
            self._grad_test_helper(device, dtype, op, self._get_safe_inplace(op.get_inplace()))

    @_gradcheck_ops("gradgrad")
    def test_fn_gradgrad(self, device, dtype, op):
        self._skip_helper(op, device, dtype)
        if not op.supports_gradgrad:
            self.skipTest("Op claims it doesn't support gradgrad. This is not verified.")
        self._check_helper(device, dtype, op, op.get_op(), "bwgrad_bwgrad")

    @_gradcheck_ops("fail_gradgrad")
    def test_fn_fail_gradgrad(self, device, dtype, op):
        self._skip_helper(op, device, dtype)
        if op.supports_gradgrad:
            self.skipTest("Skipped! Operation does support gradgrad")
        with self.assertRaisesRegex(RuntimeError, r"derivative for .* is not implemented"):
            self._check_helper(device, dtype, op, op.get_op(), "bwgrad_bwgrad")

    @_gradcheck_ops("inplace_gradgrad")
    def test_inplace_gradgrad(self, device, dtype, op):
        self._skip_helper(op, device, dtype)
        if not op.inplace_variant or not op.supports_inplace_autograd:
            self.skipTest("Skipped! Operation does not support inplace autograd.")
        self._check_helper(device, dtype, op, self._get_safe_inplace(op.get_inplace()), "bwgrad_bwgrad")


class TestFwdGradients(TestGradients):
    def _forward(self, device, dtype, op, variant, is_inplace):
        batched = (op.check_batched_forward_grad and not is_inplace) or (
            op.check_inplace_batched_forward_grad and is_inplace
        )
        kwargs = dict(check_forward_ad=True, check_backward_ad=False, check_batched_grad=False)
        if op.supports_forward_ad:
            self._grad_test_helper(device, dtype, op, variant, **kwargs, check_batched_forward_grad=batched)
        else:
            with self.assertRaisesRegex(NotImplementedError, NO_FORWARD_AD):
                self._grad_test_helper(device, dtype, op, variant, **kwargs, check_batched_forward_grad=batched)

    @_gradcheck_ops("fwgrad_bwgrad")
    def test_fn_fwgrad_bwgrad(self, device, dtype, op):
        self._skip_helper(op, device, dtype)
        if op.supports_fwgrad_bwgrad:
            self._check_helper(device, dtype, op, op.get_op(), "fwgrad_bwgrad")
        else:
            with self.assertRaisesRegex(NotImplementedError, NO_FORWARD_AD):
                self._check_helper(device, dtype, op, op.get_op(), "fwgrad_bwgrad")

    @_gradcheck_ops("fwgrad")
    def test_forward_mode_AD(self, device, dtype, op):  # noqa: N802 (PyTorch's name)
        self._skip_helper(op, device, dtype)
        self._forward(device, dtype, op, op.get_op(), is_inplace=False)

    @_gradcheck_ops("inplace_fwgrad")
    def test_inplace_forward_mode_AD(self, device, dtype, op):  # noqa: N802 (PyTorch's name)
        self._skip_helper(op, device, dtype)
        if not op.inplace_variant or not op.supports_inplace_autograd:
            self.skipTest("Skipped! Operation does not support inplace autograd.")
        self._forward(device, dtype, op, self._get_safe_inplace(op.get_inplace()), is_inplace=True)


# instantiated in a namespace of their own (it takes the generic classes out): not collected
# by pytest, run below with unittest
_classes: dict = {"TestBwdGradients": TestBwdGradients, "TestFwdGradients": TestFwdGradients}
instantiate_device_type_tests(TestBwdGradients, _classes, only_for="cpu")
instantiate_device_type_tests(TestFwdGradients, _classes, only_for="cpu")
del TestBwdGradients, TestFwdGradients


class _Outcomes(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.outcomes: dict[str, str] = {}

    def addSuccess(self, test):  # noqa: N802 (unittest's names)
        self.outcomes[test._testMethodName] = PASS

    def addSkip(self, test, reason):  # noqa: N802
        self.outcomes[test._testMethodName] = SKIPPED

    def addExpectedFailure(self, test, err):  # noqa: N802
        self.outcomes[test._testMethodName] = XFAIL

    def addUnexpectedSuccess(self, test):  # noqa: N802
        self.outcomes[test._testMethodName] = FAIL

    def addFailure(self, test, err):  # noqa: N802
        self.outcomes[test._testMethodName] = FAIL

    def addError(self, test, err):  # noqa: N802
        self.outcomes[test._testMethodName] = FAIL


def _pytorch_outcomes() -> dict[str, str]:
    result = _Outcomes()
    for cls in _classes.values():
        unittest.defaultTestLoader.loadTestsFromTestCase(cls).run(result)
    return result.outcomes


def _distcheck_outcomes() -> tuple[dict[str, str], dict[str, list]]:
    suite, checker = get_suite("torch-opinfo"), distcheck_checker(SerialExecutor())
    verdicts: dict[str, list] = {}
    for kind, names in KINDS.items():
        for info in suite.cases(Selection(checks=(kind,), ops=names)):
            verdict = info.status if info.status != "run" else judge(suite.build(info.id), checker)
            verdict = verdict if isinstance(verdict, str) else verdict[0]
            verdicts.setdefault(pytorch_test(kind, info.id.op, info.id.dtype).name, []).append((info.id, verdict))
    return {name: aggregate(v for _, v in cases) for name, cases in verdicts.items()}, verdicts


@pytest.mark.filterwarnings("ignore")
def test_outcome_for_outcome_with_pytorchs_tests():
    torch.manual_seed(0)
    pytorch = _pytorch_outcomes()
    distcheck, cases = _distcheck_outcomes()
    # distcheck enumerates no test of a dtype without backward support: PyTorch only skips those
    missing = {name for name, outcome in pytorch.items() if name not in distcheck and outcome != SKIPPED}
    assert not missing
    assert not set(distcheck) - set(pytorch)
    differing = {name: (pytorch[name], distcheck[name]) for name in distcheck if pytorch[name] != distcheck[name]}
    assert not differing, {name: (o, cases[name]) for name, o in differing.items()}
    # every branch was taken, both ways
    seen = set(pytorch.values())
    assert {PASS, SKIPPED, XFAIL} <= seen
    assert distcheck["test_inplace_grad_acosh_cpu_float64"] == PASS  # raised, as expected
    assert distcheck["test_fn_fail_gradgrad_cdist_cpu_float64"] == PASS
    raising = ("forward_mode_AD_cdist", "fn_fwgrad_bwgrad_cdist", "inplace_forward_mode_AD_index_reduce_mean")
    for name in (f"test_{test}_cpu_float64" for test in raising):
        assert distcheck[name] == PASS and len(cases[name]) == 1  # one case: its test's loop until a raise
    assert distcheck["test_fn_grad_cov_cpu_float64"] == XFAIL
    assert distcheck["test_fn_grad_cond_simple_cpu_float64"] == PASS
    cat = dict(cases["test_fn_gradgrad_cat_cpu_float64"])
    assert set(cat.values()) == {XPASS, XFAIL}  # only sample 5 fails, in torch's gradcheck only
