"""Made-up nights for the history's tests: run folders written by the run's own writers (the
run folder's ``RunWriter``, the JSON report), each started on a night of its own."""

from __future__ import annotations

import datetime
import os

from distcheck.records.case_record import CaseRecord, RecordBatch
from distcheck.records.result import RunResult
from distcheck.reports import json_report
from distcheck.storage.run_folder import RunWriter
from tests.reports.runs import case

FIRST = datetime.datetime(2026, 12, 1, 3, 0, tzinfo=datetime.UTC)
VERSIONS = {"distcheck": "0.1.0", "torch": "2.13.0", "python": "3.12.3"}


def night(n: int) -> str:
    """The name of night ``n`` (night 0 is 2026-12-01)."""
    return (FIRST + datetime.timedelta(days=n)).date().isoformat()


def started(n: int, hour: int = 3) -> str:
    return (FIRST + datetime.timedelta(days=n, hours=hour - 3)).isoformat(timespec="seconds")


def records(verdicts: dict[str, str], seconds: dict[str, float] | None = None, suite: str = "torch-opinfo"):
    """A record per op (its grad case), with its verdict and seconds (0.1 unless given)."""
    seconds = seconds or {}
    return [
        CaseRecord(case(op, suite=suite), verdict, "" if verdict == "pass" else f"{verdict}!", seconds.get(op, 0.1), 1)
        for op, verdict in verdicts.items()
    ]


def run_folder(
    path,
    n: int,
    verdicts: dict[str, str],
    seconds: dict[str, float] | None = None,
    *,
    versions: dict | None = None,
    finished: bool = True,
    report: bool = True,
    suite: str = "torch-opinfo",
    mode: str = "fast",
    hour: int = 3,
) -> str:
    """A run folder of night ``n``: ``finished``, its RunFinish line and (``report``) report.json
    (complete); unfinished, a driver killed mid-run (no finish line) or, with ``report``, a run
    stopped by a signal (report.json says it is not complete)."""
    folder = str(path)
    start = {
        "$report_type": "RunStart",
        "suite": suite,
        "mode": mode,
        "started": started(n, hour),
        "versions": versions or VERSIONS,
    }
    result = RunResult(suite, mode, "serial", 1, 1.0, records(verdicts, seconds, suite), complete=finished)
    writer = RunWriter(folder, start)
    writer.started(result)
    writer.recorded(RecordBatch(result.records))
    if finished:
        writer.finished(result)
    writer.close()
    if report:
        if not finished:
            result.interrupted = "SIGINT"
        json_report.write(result, os.path.join(folder, "report.json"), start=start)
    return folder
