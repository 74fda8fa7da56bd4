"""The runner with serial dispatch: verdicts, budgets, timeouts, order of records."""

from __future__ import annotations

import time

from distcheck.runner import RunOptions, run_suite
from distcheck.suites import Selection, get_suite
from tests.runner import fake_suite
from tests.runner.fake_suite import FakeSuite

SERIAL = RunOptions(serial=True, timeout=60)
EXPECTED = {
    "sin": "pass",
    "wrong": "fail",
    "crash": "error",
    "mismatch": "error",
    "nobuild": "error",
    "skipped": "skipped",
    "xfail": "xfail",
}


def _by_op(result):
    return {r.case.op: r for r in result.records}


def test_verdicts_of_every_kind():
    result = run_suite(FakeSuite(ops=tuple(EXPECTED)), Selection(checks=("grad",)), SERIAL)
    records = _by_op(result)
    assert {op: r.verdict for op, r in records.items()} == EXPECTED
    assert (
        "fingerprint fp-other" in records["mismatch"].message
        and "driver enumerated fp-mismatch" in records["mismatch"].message
    )
    assert "rebuilding the case failed: KeyError" in records["nobuild"].message
    assert records["skipped"].message == "skipped on purpose" and records["skipped"].tasks == 0
    assert records["sin"].tasks == 1 and records["sin"].seconds > 0
    assert [r.case.op for r in result.records] == list(EXPECTED)  # enumeration order
    assert result.failed and result.counts()["error"] == 3


def test_timeout_interrupts_the_case_and_the_run_goes_on(monkeypatch):
    monkeypatch.setattr(fake_suite, "SLEEP", 30.0)
    start = time.perf_counter()
    result = run_suite(FakeSuite(ops=("sleep", "sin")), Selection(checks=("grad",)), RunOptions(serial=True, timeout=1))
    assert time.perf_counter() - start < fake_suite.SLEEP  # it did not wait for the sleep to end
    records = _by_op(result)
    assert records["sleep"].verdict == "timeout" and "1 s" in records["sleep"].message
    assert 1 <= records["sleep"].seconds < fake_suite.SLEEP
    assert records["sin"].verdict == "pass"


def test_memory_budget_skips_slow_cases_only():
    selection = Selection(checks=("grad",))
    tiny = RunOptions(serial=True, max_jacobian_mb=1e-6)
    (slow,) = run_suite(FakeSuite("slow", ops=("sin",)), selection, tiny).records
    assert slow.verdict == "skipped" and "over the memory budget: Jacobian 4 × 4" in slow.message
    assert slow.estimate["bytes"] == 2 * 4 * 4 * 8
    (fast,) = run_suite(FakeSuite("fast", ops=("sin",)), selection, tiny).records
    assert fast.verdict == "pass"


def test_max_cases():
    result = run_suite(
        FakeSuite(ops=("sin", "wrong"), samples=3), Selection(checks=("grad",)), RunOptions(serial=True, max_cases=4)
    )
    assert [r.id for r in result.records] == [
        "fake::sin::float64::sample0::grad",
        "fake::sin::float64::sample1::grad",
        "fake::sin::float64::sample2::grad",
        "fake::wrong::float64::sample0::grad",
    ]


def test_torch_opinfo_end_to_end():
    suite = get_suite("torch-opinfo")
    selection = Selection(
        checks=("grad", "gradgrad"), ops=("linalg.det", "cdist"), dtypes=("float64",), substring="::sample1::"
    )
    result = run_suite(suite, selection, SERIAL)
    assert [(r.id, r.verdict) for r in result.records] == [
        ("torch-opinfo::linalg.det::float64::sample1::grad", "pass"),
        ("torch-opinfo::linalg.det::float64::sample1::gradgrad", "pass"),
        ("torch-opinfo::cdist::float64::sample1::grad", "pass"),
    ]  # cdist's gradgrad test is skipped, as a whole: its id has no sample part
    assert not result.failed and result.executor == "serial"
