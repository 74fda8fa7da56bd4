"""Expected failures run: xfail / xpass verdicts, torch's own checks on a sample distcheck's
pass, and the run failing only for a test whose cases all passed."""

from __future__ import annotations

import io

import torch

from distcheck.case.judge import distcheck_checker, judge
from distcheck.executors.serial import SerialExecutor
from distcheck.records.case_record import PASS, XFAIL, XPASS, CaseRecord
from distcheck.records.record_list import RecordList
from distcheck.records.result import RunResult
from distcheck.reports import junit
from distcheck.reports.console import summary
from distcheck.suites.base import BuiltCase, CaseId, CheckCall
from distcheck.suites.checkers import Checker


class _WrongSin(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2 * x.cos()


def _case(func, reference=None) -> BuiltCase:
    x = torch.rand(3, dtype=torch.float64, requires_grad=True)
    case = CaseId("fake", "op", "float64", "grad", 0)
    return BuiltCase(
        case, func, (x,), (CheckCall("gradcheck", {}),), "print", expected_failure="known bug", reference=reference
    )


def _failing_reference() -> Checker:
    def fails(*args, **kwargs):
        raise RuntimeError("The size of tensor a (25) must match the size of tensor b (0)")

    return Checker(fails, fails, ())


def test_xfail_and_xpass():
    checker = distcheck_checker(SerialExecutor())
    verdict, message = judge(_case(_WrongSin.apply), checker)
    assert verdict == XFAIL and message.startswith("expected to fail (known bug); fail: Jacobian mismatch")
    verdict, message = judge(_case(torch.sin), checker)
    assert verdict == XPASS and "unexpected success" in message


def test_a_pass_that_the_reference_fails_is_xfail_with_its_message():
    verdict, message = judge(_case(torch.sin, reference=_failing_reference), distcheck_checker(SerialExecutor()))
    assert verdict == XFAIL
    assert "distcheck's checks pass" in message and "must match the size of tensor b (0)" in message


def _record(op: str, sample: int, verdict: str) -> CaseRecord:
    return CaseRecord(CaseId("fake", op, "float64", "grad", sample), verdict, f"{verdict} message", 0.1, 1)


def test_only_a_test_whose_cases_all_passed_fails_the_run():
    records = [
        _record("fixed", 0, XPASS),
        _record("fixed", 1, XPASS),
        _record("broken", 0, XPASS),
        _record("broken", 1, XFAIL),  # PyTorch's test stops here: xfailed
        _record("fine", 0, PASS),
    ]
    assert RecordList.of(records).unexpected_passes() == ["fake::fixed::float64::grad"]
    result = RunResult("fake", "fast", "serial", 1, records=records)
    assert result.failed
    text = summary(result)
    assert "Unexpected successes (1 tests" in text and "XPASS fake::fixed::float64::grad" in text
    assert text.rstrip().endswith("FAILED")
    assert not RunResult("fake", "fast", "serial", 1, records=records[2:]).failed
    out = io.StringIO()
    junit.write(out, records, {}, lambda r: "repro")
    xml = out.getvalue()
    assert xml.count('type="UnexpectedSuccess"') == 2 and xml.count('type="pytest.xpass"') == 1
