"""What a run says about each case: its verdict, message, time and number of tasks (a
:class:`CaseRecord`); records as they travel and are kept, in columns (a :class:`RecordBatch`);
a run's records in order are a :class:`~distcheck.records.record_list.RecordList`."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from distcheck.kinds import BAD_VERDICTS, Verdict
from distcheck.suites.base import CaseId, check_of

PASS, FAIL, ERROR, SKIPPED, XFAIL, XPASS, TIMEOUT, FLAKY = (
    Verdict.PASS,
    Verdict.FAIL,
    Verdict.ERROR,
    Verdict.SKIPPED,
    Verdict.XFAIL,
    Verdict.XPASS,
    Verdict.TIMEOUT,
    Verdict.FLAKY,
)
# xpass: a case of a test expected to fail that passed: the run fails if none of its test's
# cases failed (see unexpected_passes), as PyTorch's test fails on an unexpected success
VERDICTS = (PASS, FAIL, ERROR, SKIPPED, XFAIL, TIMEOUT)  # counted in every run (xpass, flaky: where there are some)
BAD = BAD_VERDICTS  # verdicts that make a run fail
_COMPACT = json.JSONEncoder(separators=(",", ":"))  # json.dumps with options makes an encoder per call


@dataclass(frozen=True)
class CaseRecord:
    """The result of one case. ``tasks``: executor tasks it took (0: decided without running,
    1: run whole in one task, more: split into Jacobian chunks). ``estimate``: the planner's
    estimate of its size and time, when it made one. ``blocks``: the file (in the run folder's
    ``blocks/``) holding the Jacobian blocks of a failed comparison, when they were kept.
    ``attempts``: with ``--reruns``, every run's outcome (``verdict``, ``seconds``, ``message``),
    the first one first. ``traceback``: where the check raised (an ``error``), the error's
    traceback, bounded (its last lines); optional in JSON, as every field after ``tasks``.
    ``batch_counts``: what its checks' slow-mode Jacobian comparisons were decided on
    (:meth:`BatchCounts.to_json <distcheck.reduce.counts.BatchCounts.to_json>`), where they
    counted some."""

    case: CaseId
    verdict: Verdict
    message: str = ""
    seconds: float = 0.0
    tasks: int = 0
    estimate: dict[str, Any] | None = field(default=None, compare=False)
    blocks: str | None = field(default=None, compare=False)
    attempts: tuple[dict[str, Any], ...] | None = field(default=None, compare=False)
    traceback: str | None = field(default=None, compare=False)
    batch_counts: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def id(self) -> str:
        return self.case.text

    def to_json(self) -> dict[str, Any]:
        record = {
            "id": self.id,
            "op": self.case.op,
            "check": self.case.check,
            "dtype": self.case.dtype,
            "sample": self.case.sample,
            "verdict": self.verdict,
            "message": self.message,
            "seconds": round(self.seconds, 6),
            "tasks": self.tasks,
        }
        if self.estimate is not None:
            record["estimate"] = dict(self.estimate)
        if self.blocks is not None:
            record["blocks"] = self.blocks
        if self.attempts is not None:
            record["attempts"] = [dict(a) for a in self.attempts]
        if self.traceback is not None:
            record["traceback"] = self.traceback
        if self.batch_counts is not None:
            record["batch_counts"] = self.batch_counts
        return record

    @cached_property
    def json_text(self) -> str:
        """:meth:`to_json` as compact JSON text, made once: the run folder's line and the JSON
        report both write it (the C encoder; an indented dump runs Python code per value)."""
        return _COMPACT.encode(self.to_json())

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> CaseRecord:
        """The record :meth:`to_json` wrote (raises ValueError or KeyError on another shape)."""
        attempts = record.get("attempts")
        return cls(
            CaseId.parse(record["id"]),
            Verdict(record["verdict"]),
            str(record.get("message", "")),
            float(record.get("seconds", 0.0)),
            int(record.get("tasks", 0)),
            record.get("estimate"),
            record.get("blocks"),
            None if attempts is None else tuple(dict(a) for a in attempts),
            record.get("traceback"),
            record.get("batch_counts"),
        )


class RecordBatch:
    """Records as columns: the one shape in which records travel, from where they are made (a
    runner on a worker, the driver, a serial run) to the collector, the listeners (the run
    folder, the progress line) and the run's :class:`RecordList`. A single record is a batch of
    one. The columns are the records' fields (``keys``: their id texts; ``estimates``,
    ``blocks``, ``attempts``, ``tracebacks``: None when no record has one) and ``bodies``, each record's
    compact JSON text without its opening brace: the run folder writes a batch in one join of
    them, the JSON report a run in one. ``tally``: the batch's (check kind, verdict) counts;
    ``bad``: the positions of its bad records.

    Pickled, a batch is its columns, the JSON texts made where the records were (a runner's
    batch costs the driver a few lists to load, not an object per case); a :class:`CaseRecord`
    is made from them only when one is read (:meth:`record`), once."""

    FIELDS = (
        "keys",
        "verdicts",
        "messages",
        "seconds",
        "tasks",
        "estimates",
        "blocks",
        "attempts",
        "tracebacks",
        "batch_counts",
    )
    __slots__ = (*FIELDS, "_bodies", "tally", "bad", "_records")

    def __init__(self, records: Iterable[CaseRecord] = ()):
        records = list(records)
        self.keys = [record.id for record in records]
        self.verdicts = [record.verdict for record in records]
        self.messages = [record.message for record in records]
        self.seconds = [record.seconds for record in records]
        self.tasks = [record.tasks for record in records]
        self.estimates = _optional([record.estimate for record in records])
        self.blocks = _optional([record.blocks for record in records])
        self.attempts = _optional([record.attempts for record in records])
        self.tracebacks = _optional([record.traceback for record in records])
        self.batch_counts = _optional([record.batch_counts for record in records])
        self._bodies: list[str] | None = None  # made when first read (a report's records may never need them)
        self._records: list[CaseRecord | None] | None = records
        self._summarize()

    @property
    def bodies(self) -> list[str]:
        if self._bodies is None:
            self._bodies = [record.json_text[1:] for record in self._records]
        return self._bodies

    def _summarize(self) -> None:
        """The batch's tally of (check kind, verdict) and its bad records, from its columns."""
        self.tally = dict(Counter(zip(map(check_of, self.keys), self.verdicts)))
        self.bad = tuple(j for j, verdict in enumerate(self.verdicts) if verdict in BAD)

    def __reduce__(self):
        columns = [getattr(self, name) for name in RecordBatch.FIELDS]
        return _load_batch, (*columns, self.bodies, self.tally, self.bad)

    def __len__(self) -> int:
        return len(self.keys)

    def __bool__(self) -> bool:
        return bool(self.keys)

    def record(self, j: int) -> CaseRecord:
        """The ``j``-th record (made from the columns when first read)."""
        if self._records is None:
            self._records = [None] * len(self.keys)
        record = self._records[j]
        if record is None:
            fields = [None if (column := getattr(self, name)) is None else column[j] for name in RecordBatch.FIELDS[1:]]
            record = self._records[j] = _record(CaseId.parse(self.keys[j]), *fields, "{" + self.bodies[j])
        return record

    def records(self) -> list[CaseRecord]:
        return [self.record(j) for j in range(len(self.keys))]

    def without(self, indices: Iterable[int]) -> tuple[RecordBatch, list[CaseRecord]]:
        """This batch less the records at ``indices``, and those records."""
        out = set(indices)
        kept = [j for j in range(len(self.keys)) if j not in out]
        rest = object.__new__(RecordBatch)
        for name in (*RecordBatch.FIELDS, "_bodies", "_records"):
            column = getattr(self, name)
            setattr(rest, name, None if column is None else [column[j] for j in kept])
        rest._summarize()
        return rest, [self.record(j) for j in sorted(out)]

    def __repr__(self) -> str:
        return f"RecordBatch({len(self.keys)} records: {self.tally})"


def _optional(column: list) -> list | None:
    """``column``, or None if it holds nothing but None (a batch of records without that field)."""
    return column if any(value is not None for value in column) else None


def _load_batch(*columns: Any) -> RecordBatch:
    batch = object.__new__(RecordBatch)
    for name, column in zip((*RecordBatch.FIELDS, "_bodies", "tally", "bad"), columns):
        setattr(batch, name, column)
    batch._records = None
    return batch


def _record(
    case: CaseId, verdict, message, seconds, tasks, estimate, blocks, attempts, traceback, counts, text: str
) -> CaseRecord:
    """A record of a batch, its fields set at once (a frozen dataclass's ``__init__`` sets each
    apart) and its JSON text the one made with it."""
    record = object.__new__(CaseRecord)
    record.__dict__.update(
        case=case,
        verdict=verdict,
        message=message,
        seconds=seconds,
        tasks=tasks,
        estimate=estimate,
        blocks=blocks,
        attempts=attempts,
        traceback=traceback,
        batch_counts=counts,
        json_text=text,  # what the cached property would make again
    )
    return record
