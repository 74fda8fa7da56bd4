"""The JSON report of a run: ``{"summary": {...}, "cases": [...]}``, one record per case. The
summary names when the run started and the versions it ran with (from its run folder's
``RunStart`` line): the history store files a report under its night.

An interrupted run's report has ``"complete": false``, what stopped it and the command that
resumes it; its counts are those of the cases recorded so far. A run made by the command line
records how its cases were chosen (``origin``): ``spec``, what ``--suite`` took where it is not
the suite's name (``MODULE:NAME``: the printed commands need it), and the ``selection``
(``distcheck compare`` says when two runs' selections differ)."""

from __future__ import annotations

import json
import platform
from collections.abc import Mapping
from typing import Any

from distcheck.records.record_list import RecordList
from distcheck.records.result import RunResult
from distcheck.storage import location

Start = Mapping[str, Any] | None  # the run folder's RunStart line
Origin = Mapping[str, Any]  # {"spec": ..., "selection": {...}}: how a run's cases were chosen


def report(
    result: RunResult,
    command: list[str] | None = None,
    resume: list[str] | None = None,
    start: Start = None,
    origin: Origin | None = None,
) -> dict[str, Any]:
    summary = report_summary(result, command, resume, start, origin)
    return {"summary": summary, "cases": [r.to_json() for r in result.records]}


def report_summary(
    result: RunResult,
    command: list[str] | None = None,
    resume: list[str] | None = None,
    start: Start = None,
    origin: Origin | None = None,
) -> dict[str, Any]:
    import distcheck

    tally = result.tally()
    summary = {
        "suite": result.suite,
        **(origin or {}),
        "mode": result.mode,
        "executor": result.executor,
        "workers": result.workers,
        "seconds": round(result.seconds, 3),
        "cases": len(result.records),
        "verdicts": tally.counts(),
        "by_check": {check: tally.counts(check) for check in tally.checks},
        "failed": tally.failed or bool(result.unexpected_passes),
        "unexpected_passes": result.unexpected_passes,
        "complete": result.complete,
        "distcheck": distcheck.__version__,
        "python": platform.python_version(),
    }
    if result.suite == "torch-opinfo":
        from distcheck.suites.torch_opinfo.disabled import disabled_count

        summary["disabled"] = disabled_count(RecordList.of(result.records))  # skipped as PyTorch's disabled tests
    counts = RecordList.of(result.records).batch_counts()
    if counts:  # slow mode, batching on: the Jacobian comparisons decided batched, and those not by reason
        summary["batch_counts"] = counts.to_json()
    if result.device != "cpu":  # a CPU run's summary is as it always was
        summary["device"] = result.device
    if result.placement is not None:
        summary["placement"] = result.placement
    if result.first_dispatch is not None:  # the run's start-up (enumeration, Ray's start, warm-up)
        summary["first_dispatch"] = round(result.first_dispatch, 3)
    if command is not None:
        summary["command"] = command
    for key in ("started", "versions"):
        if start and key in start:
            summary[key] = start[key]
    if result.interrupted is not None:
        summary["interrupted"] = result.interrupted
    if resume is not None and not result.complete:
        summary["resume"] = resume
    return summary


def text(
    result: RunResult,
    command: list[str] | None = None,
    resume: list[str] | None = None,
    start: Start = None,
    origin: Origin | None = None,
    summary: Mapping[str, Any] | None = None,
) -> str:
    """The report as JSON text: the summary indented, then a compact line per case (made once
    per record, with the C encoder: an indented dump of 45,000 cases is seconds of Python).
    ``summary``: the run's :func:`report_summary` where the caller made it already (it goes over
    every record)."""
    if summary is None:
        summary = report_summary(result, command, resume, start, origin)
    summary_text = json.dumps(summary, indent=1).replace("\n", "\n ")
    # one join of the records' texts (their batches' columns on Ray: no record is made), each
    # without its "{": a string per record made for the join (an f-string each) costs the
    # driver several times as much (docs/benchmarks.md)
    bodies = RecordList.of(result.records).bodies()
    cases = "\n  {" + ",\n  {".join(bodies) if bodies else ""
    return f'{{\n "summary": {summary_text},\n "cases": [{cases}\n ]\n}}\n'


def write(
    result: RunResult,
    path: str | list[str],
    command: list[str] | None = None,
    resume: list[str] | None = None,
    start: Start = None,
    origin: Origin | None = None,
    summary: Mapping[str, Any] | None = None,
) -> None:
    """Write the report to ``path`` (or to each of several paths, local or URLs: the text made
    once) whole: a reader, or a driver killed while writing, never sees half a report."""
    report_text = text(result, command, resume, start, origin, summary)
    for one in [path] if isinstance(path, str) else path:
        location.write_text(one, report_text)
