"""Verdicts of built cases, with distcheck's checks and with torch's."""

from __future__ import annotations

import pytest
import torch

from distcheck.case.judge import distcheck_checker, judge
from distcheck.executors.serial import SerialExecutor
from distcheck.suites import BuiltCase, CaseId, CheckCall, ExpectedError
from distcheck.suites.checkers import torch_checker
from tests.runner.fake_suite import FUNCTIONS, _crash

CASE = CaseId("test", "op", "float64", "grad", 0)
GRADCHECK = (CheckCall("gradcheck", {}),)
CHECKERS = {"distcheck": distcheck_checker(SerialExecutor()), "torch": torch_checker()}


def _built(func, calls=GRADCHECK, expected=None) -> BuiltCase:
    x = torch.linspace(0.1, 0.9, 4, dtype=torch.float64).requires_grad_()
    return BuiltCase(CASE, func, (x,), tuple(calls), "fp", expected)


@pytest.mark.parametrize("checker", CHECKERS)
def test_verdicts(checker):
    check = CHECKERS[checker]
    assert judge(_built(torch.sin), check) == ("pass", "")
    verdict, message = judge(_built(FUNCTIONS["wrong"]), check)
    assert verdict == "fail" and "Jacobian mismatch" in message
    verdict, message = judge(_built(_crash), check)
    assert verdict == "error" and "ValueError: this op is broken" in message


def test_expected_error_passes_only_if_raised():
    expected = ExpectedError(ValueError, "is broken")
    check = CHECKERS["distcheck"]
    assert judge(_built(_crash, expected=expected), check) == ("pass", "")
    verdict, message = judge(_built(torch.sin, expected=expected), check)
    assert verdict == "fail" and "but the checks passed" in message
    verdict, message = judge(_built(FUNCTIONS["wrong"], expected=expected), check)
    assert verdict == "fail" and "expected ValueError" in message


class _WrongSecondDerivative(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.detach().cos()  # right first derivative, not differentiable in x


def test_failing_call_is_named_and_rng_reseeded_per_call():
    seeds = []
    calls = [CheckCall("gradgradcheck", {"gen_non_contig_grad_outputs": flag}) for flag in (False, True)]
    case = _built(_WrongSecondDerivative.apply, calls)
    case.before_call = lambda: seeds.append(torch.manual_seed(7))
    verdict, message = judge(case, CHECKERS["distcheck"])
    assert verdict == "fail" and message.startswith("gradgradcheck (call 1 of 2, gen_non_contig_grad_outputs=False)")
    assert len(seeds) == 1  # stopped at the first failing call


class _NoDerivative(torch.autograd.Function):
    """sin, whose backward raises (a derivative not implemented); counts its forward calls."""

    calls = 0

    @staticmethod
    def forward(ctx, x):
        _NoDerivative.calls += 1
        return x.sin()

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("derivative for aten::sin_like is not implemented")


@pytest.mark.parametrize("checker", CHECKERS)
def test_a_case_expected_to_fail_whose_backward_raises_is_xfail_with_torchs_error(checker):
    """distcheck ends such a check at the backward's error, before the finite differences (torch
    computes them first): the verdict and the message are the same, the function called fewer
    times; a case not expected to fail keeps torch's order (its error after the numerical
    Jacobian)."""
    x = torch.linspace(0.1, 0.9, 40, dtype=torch.float64).requires_grad_()
    calls = {}
    for expected in ("its backward is not implemented", None):
        case = BuiltCase(CASE, _NoDerivative.apply, (x,), GRADCHECK, "fp", expected_failure=expected)
        _NoDerivative.calls = 0
        verdict, message = judge(case, CHECKERS[checker])
        calls[expected] = _NoDerivative.calls
        error = "RuntimeError: derivative for aten::sin_like is not implemented"
        if expected is None:
            assert verdict == "error" and error in message
        else:
            assert (
                verdict == "xfail"
                and message.startswith(f"expected to fail ({expected}); error: ")
                and error in message
            )
    assert calls[None] > 2 * x.numel()  # the numerical Jacobian: two calls per element
    if checker == "distcheck":
        assert calls["its backward is not implemented"] < x.numel()
