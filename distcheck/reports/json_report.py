"""The JSON report of a run: ``{"summary": {...}, "cases": [...]}``, one record per case."""

from __future__ import annotations

import json
import platform
from typing import Any

from distcheck.runner.runner import RunResult
from distcheck.suites.base import CHECK_KINDS


def report(result: RunResult, command: list[str] | None = None) -> dict[str, Any]:
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
        "distcheck": distcheck.__version__,
        "python": platform.python_version(),
    }
    if command is not None:
        summary["command"] = command
    return {"summary": summary, "cases": [r.to_json() for r in result.records]}


def write(result: RunResult, path: str, command: list[str] | None = None) -> None:
    with open(path, "w") as f:
        json.dump(report(result, command), f, indent=1)
        f.write("\n")
