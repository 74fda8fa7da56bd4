"""The run folder: a run streamed to storage as it goes, so that nothing is lost and it can resume.

The folder is a local path or the URL of an object store (``s3://bucket/runs/x``, see
:mod:`distcheck.storage`). Its records are JSON Lines in the manner of pytest-reportlog: a
``RunStart`` line (the suite, mode, selection, options and versions: all a resume needs), one
``CaseRecord`` line per case as its verdict arrives, a ``RunResume`` line each time the run is
resumed, and a ``RunFinish`` line when a run (or part of it) ends. Locally they are
``DIR/records.jsonl``, each line written whole and flushed at once (a driver killed with SIGKILL
loses at most the line it was writing); in an object store, which cannot append, they are parts
``DIR/records/part-NNNNNN.jsonl`` written every few seconds (a driver killed loses at most the
records of the part not written yet, which a resume runs again: see
:mod:`distcheck.storage.segments`). ``DIR/report.json`` is the final report (written by the
command line). Readers skip line types they do not know.

A resumed run adds to the same records: cases already recorded are not run, nor written, again
(a record's last line wins, should a case ever appear twice).
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib.metadata
import json
import os
import platform
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distcheck.engines import get_engine
from distcheck.records.case_record import CaseRecord, RecordBatch
from distcheck.records.listener import Listener
from distcheck.records.result import RunResult
from distcheck.storage import location, segments
from distcheck.storage.writable import check_creatable, check_writable
from distcheck.suites.base import Selection, UsageError

RECORDS, REPORT = segments.RECORDS, "report.json"
TYPE = "$report_type"
RUN_START, CASE_RECORD, RUN_RESUME, RUN_FINISH = "RunStart", "CaseRecord", "RunResume", "RunFinish"
_CASE_LINE = json.dumps({TYPE: CASE_RECORD}, separators=(",", ":"))[:-1] + ","  # a case line's opening
_NEXT_CASE_LINE = "\n" + _CASE_LINE


def versions(engines: Sequence[str] = ()) -> dict[str, Any]:
    """The versions a run's verdicts depend on (a resume must have the same): distcheck's,
    torch's, Python's, and under ``"engines"`` the library version of each engine in ``engines``."""
    import distcheck

    try:
        torch = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch = None
    found = {"distcheck": distcheck.__version__, "torch": torch, "python": platform.python_version()}
    if engines:
        found["engines"] = {name: get_engine(name).library_version() for name in engines}
    return found


def _library(engine: str) -> str:
    """How a version message names an engine: by its library (``jax``), else by its name."""
    return get_engine(engine).library or engine


def run_start(
    suite: str,
    mode: str,
    selection: Selection,
    options: Any,
    command: list[str],
    engines: Sequence[str] = (),
    device: str = "cpu",
    suite_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``RunStart`` line: what was run, how, with what, by which command. ``suite`` is the
    name the suite is found by (``get_suite``); ``options``: the run's ``RunOptions`` (a
    dataclass, recorded as its fields); ``engines``: the engines its cases use;
    ``device`` is recorded unless it is the CPU (a run folder without one is a CPU run);
    ``suite_options``, if any: what the suite was made with besides its name, mode and device
    (``--disabled-tests``' entries), so that a resume makes the same suite."""
    return {
        TYPE: RUN_START,
        "suite": suite,
        "mode": mode,
        **({"device": device} if device != "cpu" else {}),
        **({"suite_options": dict(suite_options)} if suite_options else {}),
        "selection": dataclasses.asdict(selection),
        "options": dataclasses.asdict(options),
        "versions": versions(engines),
        "command": command,
        "started": _now(),
    }


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def default_folder(suite: str, mode: str, root: str = "runs") -> Path:
    """A new folder under ``root`` named by suite, mode and UTC time."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    folder, k = Path(root) / f"{suite.replace(':', '-').replace('/', '-')}-{mode}-{stamp}", 1
    while folder.exists():
        k += 1
        folder = Path(root) / f"{suite}-{mode}-{stamp}-{k}"
    return folder


def _folder(folder: str | os.PathLike) -> str | Path:
    """A run folder as the run names it: a store's URL (without a final ``/``), or a local Path."""
    text = os.fspath(folder)
    return text.rstrip("/") if location.is_url(text) else Path(location.local_path(text))


def check_new_folder(folder: str | os.PathLike) -> str | Path:
    """``folder`` (a Path, or a store's URL as given), if a new run can be recorded there
    (UsageError if it cannot be created or written, or holds a run). It is created when the
    run starts."""
    folder = _folder(folder)
    if segments.has_records(os.fspath(folder)):
        raise UsageError(f"{folder} already holds a run: finish it with --resume {folder}, or choose another --out")
    if isinstance(folder, str):  # a store: where it takes an object, the folder is there
        check_creatable(folder, "run folder")
        return folder
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"cannot create the run folder {folder}: {existing} is not a folder")
    if existing == folder:
        check_writable(folder / RECORDS, "run's records")
    elif not os.access(existing, os.W_OK):
        raise UsageError(f"cannot create the run folder {folder}: {existing} is not writable")
    return folder


class RunWriter(Listener):
    """Writes a run's records to ``folder`` (a path or URL) as they arrive (a runner listener:
    see :func:`~distcheck.storage.segments.open_records`); the folder is made when the run
    starts (after the selection proved valid). ``start``: the RunStart line of a new run; None
    to resume the run already there."""

    def __init__(self, folder: str | os.PathLike, start: dict[str, Any] | None, written: set[str] = frozenset()):
        self.folder = os.fspath(folder)
        self.written = frozenset(written)  # case ids recorded already (a resumed run's)
        self._first = start if start is not None else {TYPE: RUN_RESUME, "resumed": _now(), "versions": versions()}
        self._lock = threading.Lock()
        self._records: segments.AppendedFile | segments.SegmentWriter | None = None
        self._closed = False

    def started(self, result: RunResult) -> None:
        self._line(None)

    def _line(self, data: dict[str, Any] | None) -> None:
        self._write(None if data is None else json.dumps(data, separators=(",", ":")))

    def _write(self, text: str | None, records: int = 0) -> None:
        with self._lock:
            if self._closed:
                return
            if self._records is None:
                self._records = segments.open_records(self.folder)
                self._records.write(json.dumps(self._first, separators=(",", ":")), 0)
            if text is not None:
                self._records.write(text, records)

    def recorded(self, batch: RecordBatch) -> None:
        """A line per record, the batch's lines in one join of its JSON texts and one write
        (flushed): but for the cases already in the file when a resumed run started. Should a
        case come twice, its last line wins when the folder is read, as its last record does in
        the run's result."""
        bodies = batch.bodies
        if self.written:
            bodies = [body for key, body in zip(batch.keys, bodies) if key not in self.written]
        if bodies:
            self._write(_CASE_LINE + _NEXT_CASE_LINE.join(bodies), len(bodies))

    def finished(self, result: RunResult) -> None:
        finish = {TYPE: RUN_FINISH, "finished": _now(), "complete": result.complete}
        self._line({**finish, "cases": len(result.records), "verdicts": result.counts()})
        self.close()

    def close(self) -> None:
        """Write what waits (an object store's last part) and close; raises
        :class:`~distcheck.storage.location.StoreError` if the store cannot take it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._records is not None:
                self._records.close()


@dataclass(frozen=True)
class RunLog:
    """A run folder read back: its RunStart line, its records (one per case), whether its
    last part finished complete."""

    folder: str | Path  # a local path, or a store's URL
    start: dict[str, Any]
    records: list[CaseRecord]
    complete: bool

    @property
    def selection(self) -> Selection:
        fields = self.start["selection"]
        return Selection(**{k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()})


def _bad(folder: str | Path, why: str) -> UsageError:
    return UsageError(f"cannot resume {folder}: {why}")


def _parse(line: segments.Line, folder: str | Path) -> dict[str, Any] | None:
    try:
        data = json.loads(line.text)
    except json.JSONDecodeError:
        if line.may_be_cut:  # the line being written when the driver was killed
            return None
        raise _bad(folder, f"{line.where} line {line.number} is not JSON") from None
    if not isinstance(data, dict) or TYPE not in data:
        raise _bad(folder, f"{line.where} line {line.number} is not a distcheck record (no {TYPE!r})")
    return data


def read_run(folder: str | os.PathLike) -> RunLog:
    """The run in ``folder``, a path or URL (UsageError, saying why, for anything that is not one)."""
    folder = _folder(folder)
    if not location.is_folder(folder):
        raise _bad(folder, "no such folder")
    if not segments.has_records(os.fspath(folder)):
        raise _bad(folder, f"no {RECORDS} in it: not a run folder")
    lines = [(line, _parse(line, folder)) for line in segments.read_lines(os.fspath(folder))]
    lines = [(line, data) for line, data in lines if data is not None]
    parsed = [data for _, data in lines]
    if not parsed or parsed[0][TYPE] != RUN_START:
        where = lines[0][0].where if lines else RECORDS
        raise _bad(folder, f"{where} does not start with a {RUN_START} line")
    start = parsed[0]
    missing = [key for key in ("suite", "mode", "selection", "options", "versions") if key not in start]
    if missing:
        raise _bad(folder, f"its {RUN_START} line lacks {', '.join(missing)}")
    records: dict[str, CaseRecord] = {}
    for line, data in lines[1:]:
        if data[TYPE] == CASE_RECORD:
            try:
                record = CaseRecord.from_json(data)
            except (KeyError, ValueError, TypeError) as e:
                raise _bad(folder, f"{line.where} line {line.number} is not a case record ({e})") from None
            records[record.id] = record
    finishes = [data for data in parsed if data[TYPE] == RUN_FINISH]
    complete = bool(finishes) and parsed[-1][TYPE] == RUN_FINISH and bool(finishes[-1].get("complete"))
    return RunLog(folder, start, list(records.values()), complete)


def check_resumable(log: RunLog, suite_name: str) -> None:
    """UsageError unless ``log`` can be resumed here: same versions, records of its own suite,
    not finished."""
    recorded = log.start["versions"]
    engines = recorded.get("engines", {})
    here = versions(tuple(engines))
    pairs = [(name, recorded.get(name), here[name]) for name in ("distcheck", "torch")]
    pairs += [(_library(name), version, here["engines"][name]) for name, version in engines.items()]
    for name, then, now in pairs:
        if then != now:
            raise _bad(log.folder, f"it was run with {name} {then}, this is {name} {now}: verdicts would mix")
    for record in log.records:
        if record.case.suite != suite_name:
            raise _bad(log.folder, f"it holds case {record.id} of suite {record.case.suite!r}, not of {suite_name!r}")
    if log.complete:
        report = location.join(log.folder, REPORT)
        raise _bad(log.folder, f"the run is finished: nothing to resume (its report: {report})")
