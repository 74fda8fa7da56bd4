"""Reading a finished (or interrupted) run back: a JSON report, or a run folder, each a local
path or the URL of an object store (``s3://bucket/runs/x``, see :mod:`distcheck.storage`).

A run folder ``DIR`` is read from ``DIR/report.json`` when the run finished, else from the case
lines of its records (JSON Lines in the manner of pytest-reportlog: a ``RunStart`` line, one
``CaseRecord`` line per case, a ``RunFinish`` line at the end), ``DIR/records.jsonl`` and/or
the parts of ``DIR/records/`` (see :mod:`distcheck.storage.segments`). Failure blocks are in
``DIR/blocks/``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from distcheck.records.case_record import CaseRecord
from distcheck.storage import location, segments
from distcheck.suites.base import CaseId, UsageError

REPORT = "report.json"


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

    @property
    def spec(self) -> str | None:
        """What ``--suite`` takes to load the run's suite: a report's ``spec`` (recorded where it
        is not the suite's name), else its ``suite`` (a run folder's records name the spec there)."""
        found = self.info.get("spec") or self.info.get("suite")
        return None if found is None else str(found)

    def blocks_path(self, record: CaseRecord) -> str | None:
        """Where a record's failure blocks are, if they are there."""
        if record.blocks is None or self.folder is None:
            return None
        path = location.join(self.folder, "blocks", record.blocks)
        return path if location.exists(path) else None


def record_from_json(line: dict[str, Any]) -> CaseRecord:
    """A :class:`CaseRecord` from its ``to_json()`` (fields unknown to this version are ignored;
    those it knows after ``tasks`` are optional: a record written before them has none)."""
    return CaseRecord(
        CaseId.parse(line["id"]),
        line["verdict"],
        line.get("message", ""),
        float(line.get("seconds", 0.0)),
        int(line.get("tasks", 0)),
        line.get("estimate"),
        line.get("blocks"),
        traceback=line.get("traceback"),
        batch_counts=line.get("batch_counts"),
    )


def _records(items, where: str) -> list[CaseRecord]:
    records = []
    for k, item in enumerate(items):
        try:
            records.append(record_from_json(item))
        except (KeyError, TypeError, ValueError) as e:
            raise LoadError(f"{where}: case {k + 1} is not a case record ({type(e).__name__}: {e})") from None
    return records


def _json(path: str):
    text = location.read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise LoadError(f"{path} is not JSON ({e.msg}, line {e.lineno})") from None


def _report(path: str) -> LoadedRun:
    data = _json(path)
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise LoadError(f'{path} is not a distcheck report (no "cases" list)')
    return LoadedRun(path, dict(data.get("summary") or {}), _records(data["cases"], path))


def _record_lines(folder: str) -> LoadedRun:
    info: dict[str, Any] = {}
    items: dict[str, dict] = {}  # by case id: a resumed run may record a case again
    for line in segments.read_lines(folder):
        try:
            data = json.loads(line.text)
        except json.JSONDecodeError:
            if line.may_be_cut:
                break  # the last line of an interrupted run, half written
            raise LoadError(f"{location.join(folder, line.where)}:{line.number} is not JSON") from None
        kind = data.pop("$report_type", None)
        if kind == "CaseRecord":
            items[str(data.get("id"))] = data
        elif kind in ("RunStart", "RunFinish"):
            info.update(data)
    info.setdefault("complete", False)  # no RunFinish line: its driver was killed
    return LoadedRun(folder, info, _records(items.values(), folder))


def run_start(folder: str) -> dict[str, Any]:
    """The ``RunStart`` line of the run folder ``folder`` (when it started, the versions it ran
    with): its records' first line; ``{}`` if it has none."""
    first = next(segments.read_lines(folder), None) if segments.has_records(folder) else None
    try:
        line = json.loads(first.text) if first is not None else {}
    except json.JSONDecodeError:
        return {}
    return line if isinstance(line, dict) and line.pop("$report_type", None) == "RunStart" else {}


def load_run(path: str) -> LoadedRun:
    """The run at ``path`` (a path or URL): a JSON report, or a run folder (its report's summary
    completed with its ``RunStart`` line). Raises :class:`LoadError`, or
    :class:`~distcheck.storage.location.StoreError` when a store fails."""
    if location.is_folder(path):
        report = location.join(path, REPORT)
        if location.exists(report):
            run = _report(report)
            run.info = {**run_start(path), **run.info}
        elif segments.has_records(path):
            run = _record_lines(path)
        else:
            raise LoadError(
                f"{path} is a folder without {REPORT}, {segments.RECORDS} or {segments.PARTS}/: not a run folder"
            )
        run.folder = path
        return run
    if not location.exists(path):
        raise LoadError(f"no such report or run folder: {path}")
    return _report(path)
