"""Reading a finished (or interrupted) run back: a JSON report, or a run folder.

A run folder ``DIR`` is read from ``DIR/report.json`` when the run finished, else from the case
lines of ``DIR/records.jsonl`` (JSON Lines in the manner of pytest-reportlog: a ``RunStart``
line, one ``CaseRecord`` line per case, a ``RunFinish`` line at the end). Failure blocks are in
``DIR/blocks/``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from distcheck.runner.records import CaseRecord
from distcheck.suites.base import CaseId, UsageError, read_json


class LoadError(UsageError):
    """The path is not a run: the command line reports it in one line (exit status 2)."""


@dataclass
class LoadedRun:
    """A run as its files tell it: ``info`` (the report's summary, or the run-start line merged
    with the run-finish line) and one record per case; ``folder``: the run folder, if any."""

    path: str
    info: dict[str, Any] = field(default_factory=dict)
    records: list[CaseRecord] = field(default_factory=list)
    folder: str | None = None

    def blocks_path(self, record: CaseRecord) -> str | None:
        """Where a record's failure blocks are, if they are there."""
        if record.blocks is None or self.folder is None:
            return None
        path = os.path.join(self.folder, "blocks", record.blocks)
        return path if os.path.exists(path) else None


def record_from_json(line: dict[str, Any]) -> CaseRecord:
    """A :class:`CaseRecord` from its ``to_json()`` (fields unknown to this version are ignored)."""
    return CaseRecord(
        CaseId.parse(line["id"]),
        line["verdict"],
        line.get("message", ""),
        float(line.get("seconds", 0.0)),
        int(line.get("tasks", 0)),
        line.get("estimate"),
        line.get("blocks"),
    )


def _records(items, where: str) -> list[CaseRecord]:
    records = []
    for k, item in enumerate(items):
        try:
            records.append(record_from_json(item))
        except (KeyError, TypeError, ValueError) as e:
            raise LoadError(f"{where}: case {k + 1} is not a case record ({type(e).__name__}: {e})") from None
    return records


def _report(path: str) -> LoadedRun:
    data = read_json(path, error=LoadError)
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise LoadError(f'{path} is not a distcheck report (no "cases" list)')
    return LoadedRun(path, dict(data.get("summary") or {}), _records(data["cases"], path))


def _record_lines(path: str) -> LoadedRun:
    info: dict[str, Any] = {}
    items: dict[str, dict] = {}  # by case id: a resumed run may record a case again
    with open(path) as f:
        for number, text in enumerate(f, 1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
            except json.JSONDecodeError:
                if text.endswith("\n"):
                    raise LoadError(f"{path}:{number} is not JSON") from None
                break  # the last line of an interrupted run, half written
            kind = line.pop("$report_type", None)
            if kind == "CaseRecord":
                items[str(line.get("id"))] = line
            elif kind in ("RunStart", "RunFinish"):
                info.update(line)
    return LoadedRun(path, info, _records(items.values(), path))


def load_run(path: str) -> LoadedRun:
    """The run at ``path``: a JSON report, or a run folder. Raises :class:`LoadError`."""
    if os.path.isdir(path):
        report, lines = os.path.join(path, "report.json"), os.path.join(path, "records.jsonl")
        if os.path.exists(report):
            run = _report(report)
        elif os.path.exists(lines):
            run = _record_lines(lines)
        else:
            raise LoadError(f"{path} is a folder without report.json or records.jsonl: not a run folder")
        run.folder = path
        return run
    if not os.path.exists(path):
        raise LoadError(f"no such report or run folder: {path}")
    return _report(path)
