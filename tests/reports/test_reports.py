"""Console progress and summary, JSON report."""

from __future__ import annotations

import io
import json

from distcheck.records.case_record import CaseRecord, RecordBatch
from distcheck.records.result import RunResult
from distcheck.reports import console, json_report
from distcheck.suites import CaseId


def _result() -> RunResult:
    def record(op, check, verdict, sample=0, seconds=0.5, tasks=1, message=""):
        return CaseRecord(CaseId("torch-opinfo", op, "float64", check, sample), verdict, message, seconds, tasks)

    records = [
        record("add", "grad", "pass", seconds=0.01),
        record("add", "gradgrad", "pass", seconds=3.0, tasks=17),
        record(
            "sin",
            "grad",
            "fail",
            sample=3,
            message="Jacobian mismatch for output 0 with respect to input 0,\n" + "x\n" * 10,
        ),
        record("sin", "gradgrad", "timeout", message="stopped after 600 s (--timeout)"),
        CaseRecord(CaseId("torch-opinfo", "cov", "float64", "grad"), "xfail", "OpInfo marks it", 0.0, 0),
        CaseRecord(CaseId("torch-opinfo", "grid_sampler_3d", "float64", "grad"), "skipped", "Skipped!", 0.0, 0),
    ]
    return RunResult("torch-opinfo", "slow", "ray", 2, 12.5, records)


def test_summary_table_slowest_and_failures():
    text = console.summary(_result())
    lines = text.splitlines()
    assert lines[0] == "torch-opinfo (slow mode) on ray with 2 worker(s): 6 cases in 12.5 s"
    table = {line.split()[0]: line.split()[1:] for line in lines[2:6]}
    assert table["check"] == ["pass", "fail", "error", "skipped", "xfail", "timeout", "total"]
    assert table["grad"] == ["1", "1", "0", "1", "1", "0", "4"]
    assert table["gradgrad"] == ["1", "0", "0", "0", "0", "1", "2"]
    assert table["total"] == ["2", "1", "0", "1", "1", "1", "6"]
    assert "3.00 s     17 task(s)  pass     torch-opinfo::add::float64::sample0::gradgrad" in text
    assert "Failures (2):" in text and "FAIL torch-opinfo::sin::float64::sample3::grad" in text
    assert "... (5 more lines)" in text
    assert (
        "rerun: distcheck run --suite torch-opinfo --ops sin --dtypes float64 --checks grad "
        "-k torch-opinfo::sin::float64::sample3::grad --serial --mode slow" in text
    )
    assert lines[-1] == "FAILED"


def test_progress_on_a_terminal_redraws_one_line():
    stream = io.StringIO()
    progress = console.ConsoleProgress(stream, interval=0.0, tty=True)
    result = _result()
    progress.started(result)
    progress.enumerated(4, complete=False)
    progress.recorded(RecordBatch([result.records[0]]))
    progress.enumerated(6, complete=True)
    progress.recorded(RecordBatch([result.records[2]]))
    progress.finished(result)
    out = stream.getvalue()
    assert out.count("\n") == 2 and out.count("\r") == 3
    assert "1/4+ cases, 0 failed" in out and "2/6 cases, 1 failed" in out and "ETA" in out


def test_progress_in_a_log_prints_plain_lines():
    stream = io.StringIO()
    progress = console.ConsoleProgress(stream, interval=0.0, tty=False)
    result = _result()
    progress.started(result)
    progress.enumerated(6, complete=True)
    for record in result.records:
        progress.recorded(RecordBatch([record]))
    progress.finished(result)
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    assert lines[0].startswith("distcheck: suite torch-opinfo (slow mode) on ray, 2 worker(s)")
    assert lines[-1].startswith("progress: [########################] 6/6 cases, 2 failed")


def test_json_report(tmp_path):
    path = tmp_path / "report.json"
    json_report.write(_result(), str(path), ["distcheck", "run"])
    data = json.loads(path.read_text())
    assert set(data) == {"summary", "cases"}
    summary = data["summary"]
    assert summary["verdicts"] == {"pass": 2, "fail": 1, "error": 0, "skipped": 1, "xfail": 1, "timeout": 1}
    assert summary["by_check"]["gradgrad"]["timeout"] == 1 and summary["failed"] is True
    assert summary["command"] == ["distcheck", "run"] and summary["workers"] == 2
    first = data["cases"][1]
    assert first == {
        "id": "torch-opinfo::add::float64::sample0::gradgrad",
        "op": "add",
        "check": "gradgrad",
        "dtype": "float64",
        "sample": 0,
        "verdict": "pass",
        "message": "",
        "seconds": 3.0,
        "tasks": 17,
    }
    assert data["cases"][4]["sample"] is None


def test_json_report_to_several_paths_writes_the_same_whole_text_to_each(tmp_path):
    """``distcheck run --json FILE`` writes the run folder's report and FILE: one text, twice."""
    paths = [str(tmp_path / "report.json"), str(tmp_path / "elsewhere.json")]
    json_report.write(_result(), paths, ["distcheck", "run"])
    first, second = (open(path).read() for path in paths)
    assert first == second == json_report.text(_result(), ["distcheck", "run"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere.json", "report.json"]  # no .tmp left


def test_json_report_text_is_the_report_with_a_line_per_case():
    """The file is written as text (summary indented, a compact line per case, each record
    encoded once); it must read back as exactly :func:`json_report.report`, escapes included."""
    result = _result()
    odd = CaseRecord(CaseId("torch-opinfo", "div", "float64", "grad", 1), "error", 'quote " tab\t é \\ end', 1.0, 1)
    result.records.append(odd)
    text = json_report.text(result, ["distcheck", "run"], ["distcheck", "run", "--resume", "x"])
    assert json.loads(text) == json_report.report(result, ["distcheck", "run"], ["distcheck", "run", "--resume", "x"])
    case_lines = [line for line in text.splitlines() if line.startswith('  {"id"')]
    assert len(case_lines) == len(result.records)
    empty = RunResult("torch-opinfo", "fast", "serial", 1)
    assert json.loads(json_report.text(empty))["cases"] == []
