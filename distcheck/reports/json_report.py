"""The JSON report of a run: ``{"summary": {...}, "cases": [...]}``, one record per case.

An interrupted run's report has ``"complete": false``, what stopped it and the command that
resumes it; its counts are those of the cases recorded so far."""

from __future__ import annotations

import json
import os
import platform
from typing import Any

from distcheck.runner.runner import RunResult
from distcheck.suites.base import CHECK_KINDS


def report(result: RunResult, command: list[str] | None = None, resume: list[str] | None = None) -> dict[str, Any]:
    import distcheck

    checks = [c for c in CHECK_KINDS if any(r.case.check == c for r in result.records)]
    summary = {
        "suite": result.suite,
        "mode": result.mode,
        "executor": result.executor,
        "workers": result.workers,
        "seconds": round(result.seconds, 3),
        "cases": len(result.records),
        "verdicts": result.counts(),
        "by_check": {check: result.counts(check) for check in checks},
        "failed": result.failed,
        "complete": result.complete,
        "distcheck": distcheck.__version__,
        "python": platform.python_version(),
    }
    if result.first_dispatch is not None:  # the run's start-up (enumeration, Ray's start, warm-up)
        summary["first_dispatch"] = round(result.first_dispatch, 3)
    if command is not None:
        summary["command"] = command
    if result.interrupted is not None:
        summary["interrupted"] = result.interrupted
    if resume is not None and not result.complete:
        summary["resume"] = resume
    return {"summary": summary, "cases": [r.to_json() for r in result.records]}


def write(result: RunResult, path: str, command: list[str] | None = None, resume: list[str] | None = None) -> None:
    """Write the report to ``path`` whole: into a temporary file renamed over it (a reader, or
    a driver killed while writing, never leaves half a report)."""
    temporary = f"{path}.tmp"
    with open(temporary, "w") as f:
        json.dump(report(result, command, resume), f, indent=1)
        f.write("\n")
    os.replace(temporary, path)
