"""An ``error`` record keeps the error's traceback, bounded: serially, on Ray (a runner, a split
case's chunk on another worker) and after reruns (``tests/runner/raising_suite.py``)."""

from __future__ import annotations

import copy

import pytest

from distcheck.records.case_record import CaseRecord, RecordBatch
from distcheck.records.tracebacks import TRACEBACK_CHARS, TRACEBACK_LINES, traceback_of
from distcheck.runner import RunOptions, run_suite
from distcheck.suites import Selection, get_suite

SPEC = "tests.runner.raising_suite:suite"


def _records(mode: str = "fast", ops: tuple[str, ...] = ("kaboom", "deep"), **options) -> dict[str, CaseRecord]:
    result = run_suite(get_suite(SPEC, mode), Selection(ops=ops), RunOptions(**options))
    return {r.case.op: r for r in result.records}


def _names_the_users_function(record: CaseRecord, function: str = "explode") -> None:
    assert record.verdict == "error" and "ValueError: kaboom" in record.message, record
    assert "raising_suite.py" in record.traceback and f"in {function}\n" in record.traceback, record.traceback
    assert record.traceback.endswith("ValueError: kaboom")


def _bounded(record: CaseRecord) -> None:
    lines = record.traceback.split("\n")
    assert record.verdict == "error" and "RecursionError" in record.message
    assert len(lines) <= TRACEBACK_LINES + 1 and len(record.traceback) <= TRACEBACK_CHARS + 200
    assert "lines cut" in lines[0] and "in pong" in record.traceback and lines[-1].startswith("RecursionError")


def test_serial_error_records_keep_a_bounded_traceback():
    records = _records(serial=True)
    _names_the_users_function(records["kaboom"])
    _bounded(records["deep"])
    again = RecordBatch([records["kaboom"]])  # as records travel: columns and JSON text
    assert again.record(0).traceback == records["kaboom"].traceback
    assert CaseRecord.from_json(records["kaboom"].to_json()).traceback == records["kaboom"].traceback


def test_reruns_keep_the_traceback():
    record = _records(ops=("kaboom",), serial=True, reruns=1)["kaboom"]
    assert [a["verdict"] for a in record.attempts] == ["error", "error"]
    _names_the_users_function(record)


def test_a_passing_record_has_none():
    suite = get_suite("tests.suites.declared_suites:suite")
    result = run_suite(suite, Selection(ops=("sin",)), RunOptions(serial=True))
    assert {r.verdict for r in result.records} == {"pass"}
    assert all(r.traceback is None and "traceback" not in r.to_json() for r in result.records)


def test_a_long_message_is_cut_to_its_end():
    text = traceback_of(ValueError("x" * 50_000 + " kaboom"))
    assert len(text) <= TRACEBACK_CHARS + 100 and text.endswith("x kaboom") and "lines cut" in text.split("\n")[0]
    assert traceback_of(ValueError("short")) == "ValueError: short"  # nothing cut: said as Python says it


@pytest.mark.ray
@pytest.mark.slow
def test_on_ray_the_runners_records_keep_the_traceback(ray_cluster):
    records = _records(timeout=60)
    _names_the_users_function(records["kaboom"])
    _bounded(records["deep"])


@pytest.mark.ray
@pytest.mark.slow
def test_a_split_case_keeps_the_traceback_of_its_chunk(ray_cluster):
    record = _records("slow", ("late",), timeout=120, split_seconds=0.01)["late"]
    assert record.tasks > 1, record  # split: the error was raised in a chunk, on a runner
    _names_the_users_function(record, "explode_late")


def _copies(nested: list) -> list:
    return copy.deepcopy(nested)


def test_the_users_frames_are_kept_before_a_deep_library_stack():
    nested: list = []
    for _ in range(5000):
        nested = [nested]
    with pytest.raises(RecursionError) as raised:
        _copies(nested)  # deepcopy: thousands of the standard library's frames under the user's
    text = traceback_of(raised.value)
    lines = text.split("\n")
    assert len(lines) <= TRACEBACK_LINES + 1 and len(text) <= TRACEBACK_CHARS + 200
    assert "in _copies" in text and "return copy.deepcopy(nested)" in text, text
    assert lines[-1].startswith("RecursionError") and "copy.py" in lines[-4]
    ordered = [k for k, line in enumerate(lines) if "in test_the_users_frames" in line or "in _copies" in line]
    assert len(ordered) == 2 and lines[ordered[1] + 2] == "  …"  # the two innermost, in order, then the end
