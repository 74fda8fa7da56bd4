"""JUnit XML of a torch-opinfo run under PyTorch's test names (``--junit-names pytorch``), so
that a dashboard keyed by them (PyTorch's HUD, flaky-test trackers) reads distcheck's nightly
as it read the pytest job's.

One ``<testsuite name="test_ops_gradients" file="test_ops_gradients.py">`` per PyTorch file,
one ``<testcase classname="TestBwdGradientsCPU" name="test_fn_grad_sinh_cpu_float64">`` per
PyTorch test: the cases of all its samples, their outcome aggregated as pytest's outcome of the
test (:func:`aggregate`). A failing test's ``<failure>`` lists each bad sample: its case id,
verdict, message and the ``distcheck repro`` command. The schema the tests validate against
(Jenkins' ``junit-10.xsd``) has no ``file`` on a ``<testcase>``: it is on the ``<testsuite>``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TextIO

from distcheck.records.case_record import FAIL, PASS, SKIPPED, XFAIL, XPASS, CaseRecord
from distcheck.reports import junit
from distcheck.suites.torch_opinfo.pytorch_names import PyTorchTest, pytorch_test_of

FINE = (PASS, SKIPPED, XFAIL)  # verdicts under which a PyTorch test does not fail
SHOWN_LINES = 20  # of each bad sample's message in a <failure>


def aggregate(verdicts: Iterable[str]) -> str:
    """The outcome of a PyTorch test from its cases' verdicts: ``fail`` if a case fails, errs
    or times out (anything but pass, skipped, xfail, xpass), else ``xfail`` if one is expected
    to fail (PyTorch's test stops there: its other samples' unexpected passes do not count),
    else ``fail`` if one passed unexpectedly (every sample of a test expected to fail passed),
    ``skipped`` if all are skipped, else ``pass``."""
    seen = set(verdicts)
    if seen - {*FINE, XPASS}:
        return FAIL
    if XFAIL in seen:
        return XFAIL
    if XPASS in seen:
        return FAIL
    return SKIPPED if seen == {SKIPPED} else PASS


@dataclass
class TestResult:
    """A PyTorch test and the records of its cases, in run order."""

    __test__ = False  # not a pytest test class

    test: PyTorchTest
    records: list[CaseRecord]

    @property
    def outcome(self) -> str:
        return aggregate(r.verdict for r in self.records)

    @property
    def bad(self) -> list[CaseRecord]:
        return [r for r in self.records if r.verdict not in FINE]

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.records)


def by_test(records: Iterable[CaseRecord]) -> list[TestResult]:
    """The records grouped by PyTorch test, the tests sorted by file, class and name."""
    found: dict[PyTorchTest, TestResult] = {}
    for record in records:
        test = pytorch_test_of(record.case)
        if test not in found:
            found[test] = TestResult(test, [])
        found[test].records.append(record)
    return [found[test] for test in sorted(found)]


def _failure(result: TestResult, reproduce: Callable[[CaseRecord], str]) -> str:
    bad = result.bad
    first = bad[0]
    where = f"sample{first.case.sample}: " if first.case.sample is not None else ""
    lines = [f"{len(bad)} of {len(result.records)} case(s) of {result.test} failed:"]
    for r in bad:
        message = r.message.strip().splitlines() or ["(no message)"]
        lines += ["", f"{r.id}: {r.verdict}"] + [f"    {line}" for line in message[:SHOWN_LINES]]
        if len(message) > SHOWN_LINES:
            lines.append(f"    ... ({len(message) - SHOWN_LINES} more lines)")
        lines.append(f"    reproduce: {reproduce(r)}")
    return junit.element(
        "failure", junit.outcome_type(first), where + junit.first_line(first.message), "\n".join(lines)
    )


def _skipped(result: TestResult, outcome: str) -> str:
    record = next(r for r in result.records if r.verdict == outcome)
    kind = junit.outcome_type(record)
    return junit.element("skipped", kind, junit.first_line(record.message), record.message)


def testcase(result: TestResult, reproduce: Callable[[CaseRecord], str]) -> str:
    """The ``<testcase>`` of one PyTorch test."""
    outcome = result.outcome
    inner = ""
    if outcome == FAIL:
        inner = _failure(result, reproduce)
    elif outcome in (SKIPPED, XFAIL):
        inner = _skipped(result, outcome)
    test = result.test
    start = f"<testcase classname={junit.attr(test.classname)} name={junit.attr(test.name)} "
    start += f"time={junit.attr(f'{result.seconds:.3f}')}"
    return start + (f">{inner}</testcase>\n" if inner else "/>\n")


def _counts(results: list[TestResult]) -> dict[str, int]:
    outcomes = [r.outcome for r in results]
    return {
        "errors": 0,
        "failures": outcomes.count(FAIL),
        "skipped": outcomes.count(SKIPPED) + outcomes.count(XFAIL),
        "tests": len(outcomes),
    }


def write(
    stream: TextIO,
    records: Iterable[CaseRecord],
    properties: dict[str, str],
    reproduce: Callable[[CaseRecord], str],
    timestamp: datetime | None = None,
) -> None:
    """The JUnit XML of ``records`` on ``stream``, a testcase per PyTorch test;
    ``reproduce(record)``: the reproducer command of a failing case."""
    results = by_test(records)
    stamp = (timestamp or datetime.now(UTC)).isoformat(timespec="seconds")
    stream.write(junit.HEAD)
    for file in sorted({r.test.file for r in results}):
        tests = [r for r in results if r.test.file == file]
        name = file.removesuffix(".py")
        stream.write(
            junit.suite_start(name, _counts(tests), sum(r.seconds for r in tests), stamp, properties, file=file)
        )
        for result in tests:
            stream.write(testcase(result, reproduce))
        stream.write("</testsuite>\n")
    stream.write("</testsuites>\n")
