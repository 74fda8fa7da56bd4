"""A finished run as the history keeps it: a :class:`NightRun`, its :class:`RunHeader` (the
night it belongs to, named by the run's start time; its suites, mode, device and library
versions) and its columns (case ids, verdict codes, seconds)."""

from __future__ import annotations

import datetime
import hashlib
import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from distcheck.kinds import Verdict
from distcheck.reports.load import LoadedRun
from distcheck.suites.base import SEPARATOR, UsageError

VERDICT_NAMES: tuple[str, ...] = tuple(str(v) for v in Verdict)  # code k + 1 is VERDICT_NAMES[k]
ABSENT = 0  # the code of a case a night did not run
CODES = {name: k + 1 for k, name in enumerate(VERDICT_NAMES)}


def code_table(names: tuple[str, ...] | list[str]) -> np.ndarray:
    """The codes of this version of the verdicts for a run whose code k + 1 is ``names[k]``
    (a run written by a version with other verdicts reads right: codes map by name)."""
    table = np.zeros(256, dtype=np.uint8)
    for k, name in enumerate(names):
        if name not in CODES:
            raise UsageError(f"unknown verdict {name!r} in the history store: a newer distcheck wrote it")
        table[k + 1] = CODES[name]
    return table


def night_of(started: str) -> str:
    """The night a run belongs to: the UTC date of its start (``2026-12-07``)."""
    try:
        moment = datetime.datetime.fromisoformat(started)
    except (TypeError, ValueError):
        raise UsageError(f"bad start time {started!r}: expected an ISO 8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.astimezone(datetime.UTC).date().isoformat()


def ids_digest(ids: list[str]) -> str:
    """The name of a list of case ids: runs of the same cases share one stored list."""
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()[:32]


def suite_of(case_id: str) -> str:
    return case_id.split(SEPARATOR, 1)[0]


@dataclass(frozen=True)
class RunHeader:
    """What the history knows of a run besides its cases' columns. ``key``: the run's identity
    (its start time, mode, device and suites): the same run given twice, or as its report and
    its folder, has one key. ``ids``: the digest of its case-id list."""

    key: str
    night: str
    started: str
    mode: str
    device: str
    suites: tuple[str, ...]
    versions: dict[str, Any]
    source: str
    cases: int
    counts: dict[str, int]
    ids: str
    verdicts: tuple[str, ...] = VERDICT_NAMES  # the code table of its verdict column
    added: str = field(default="", compare=False)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunHeader:
        fields = {**data, "suites": tuple(data["suites"]), "verdicts": tuple(data["verdicts"])}
        return cls(**{k: v for k, v in fields.items() if k in cls.__dataclass_fields__})

    def library_versions(self) -> dict[str, str]:
        """Its versions flat: ``{"torch": "2.13.0", "python": "3.12.3", "tensorplay": "1.0.0"}``."""
        flat = {k: str(v) for k, v in self.versions.items() if k != "engines" and v is not None}
        for engine, version in (self.versions.get("engines") or {}).items():
            if version is not None and engine not in flat:
                flat[engine] = str(version)
        return flat


@dataclass
class NightRun:
    """A run's header and its columns: ``verdicts`` (uint8 codes of :data:`VERDICT_NAMES`) and
    ``seconds`` (float32), one per case of ``ids``."""

    header: RunHeader
    ids: list[str]
    verdicts: np.ndarray
    seconds: np.ndarray


def run_key(started: str, mode: str, device: str, suites: tuple[str, ...]) -> str:
    return hashlib.sha256(json.dumps([started, mode, device, list(suites)]).encode()).hexdigest()[:16]


def _finished(run: LoadedRun) -> None:
    info = run.info
    if info.get("complete") is True:
        return
    why = f"interrupted ({info['interrupted']})" if info.get("interrupted") else "not finished"
    where = run.folder or run.path
    raise UsageError(
        f"{where} is a run that is {why}: only finished runs go into the history "
        f"(finish it with: distcheck run --resume {where})"
    )


def from_loaded(run: LoadedRun, require_finished: bool = True) -> NightRun:
    """The history's view of a finished run (a report or run folder read back); a
    :class:`UsageError` for an unfinished run (unless not ``require_finished``: a report of an
    interrupted run reads its history) or one that does not say when it started."""
    if require_finished:
        _finished(run)
    info = run.info
    started, mode = info.get("started"), info.get("mode")
    if not isinstance(started, str):
        raise UsageError(f"{run.path} does not say when the run started: add its run folder (records.jsonl)")
    if mode is None:
        raise UsageError(f"{run.path} does not say its mode: not a distcheck run")
    ids = [r.id for r in run.records]
    suites = tuple(sorted({suite_of(i) for i in ids})) or (str(info.get("suite", "")),)
    device = str(info.get("device", "cpu"))
    verdicts = [str(r.verdict) for r in run.records]
    unknown = set(verdicts) - set(CODES)
    if unknown:
        raise UsageError(f"{run.path} has unknown verdicts: {', '.join(sorted(unknown))}")
    versions = info.get("versions") or {k: info[k] for k in ("distcheck", "python") if k in info}
    header = RunHeader(
        key=run_key(started, str(mode), device, suites),
        night=night_of(started),
        started=started,
        mode=str(mode),
        device=device,
        suites=suites,
        versions=dict(versions),
        source=run.folder or run.path,
        cases=len(ids),
        counts=dict(Counter(verdicts)),
        ids=ids_digest(ids),
    )
    codes = np.fromiter((CODES[v] for v in verdicts), dtype=np.uint8, count=len(verdicts))
    seconds = np.fromiter((r.seconds for r in run.records), dtype=np.float32, count=len(ids))
    return NightRun(header, ids, codes, seconds)
