"""What a run says about each case: its verdict, message, time and number of tasks."""

from __future__ import annotations

import dataclasses
import heapq
import json
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Sequence
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
    the first one first."""

    case: CaseId
    verdict: Verdict
    message: str = ""
    seconds: float = 0.0
    tasks: int = 0
    estimate: dict[str, Any] | None = field(default=None, compare=False)
    blocks: str | None = field(default=None, compare=False)
    attempts: tuple[dict[str, Any], ...] | None = field(default=None, compare=False)

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
        return record

    @cached_property
    def json_text(self) -> str:
        """:meth:`to_json` as compact JSON text, made once: the run folder's line and the JSON
        report both write it (the C encoder; an indented dump runs Python code per value)."""
        return _COMPACT.encode(self.to_json())

    def wire(self) -> tuple:
        """The record as a runner sends it to the driver: a plain tuple (a pickled dataclass
        costs the driver several times more to load), its JSON text made on the worker. Only
        for records of one task without blocks or attempts (what a runner makes)."""
        return (self.verdict, self.message, self.seconds, self.estimate, self.json_text)

    @classmethod
    def from_wire(cls, case: CaseId, wire: tuple) -> CaseRecord:
        """The record :meth:`wire` sent, for ``case`` (the driver's own id of it)."""
        verdict, message, seconds, estimate, text = wire
        record = object.__new__(cls)  # the fields set at once: a frozen dataclass's __init__ sets each apart
        record.__dict__.update(_WIRE_DEFAULTS)
        record.__dict__.update(case=case, verdict=verdict, message=message, seconds=seconds, estimate=estimate)
        record.__dict__["json_text"] = text  # what the cached property would make again
        return record

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
        )


_WIRE_DEFAULTS = {"tasks": 1, "blocks": None, "attempts": None}  # of a record from the wire (see CaseRecord.wire)


class RecordList(Sequence[CaseRecord]):
    """A run's records, in order. Each entry is a :class:`CaseRecord`, or ``(batch, j)``: the
    ``j``-th record of a runner's :class:`~distcheck.runner.batches.RecordBatch`, made when it
    is first read (a Ray run's driver makes no object per case: see :mod:`.batches`). What the
    end of a run reads of every case — the tally, the JSON texts, the slowest and the bad
    cases — comes from the batches' columns, without making the records. ``tally``: the
    tally of the entries, when the maker knows it (summed from the batches')."""

    __slots__ = ("_entries", "_tally")

    def __init__(self, entries: Iterable[CaseRecord | tuple[Any, int]] = (), tally: Counter | None = None):
        self._entries = list(entries)
        self._tally = tally

    @classmethod
    def of(cls, records: Sequence[CaseRecord]) -> RecordList:
        """``records`` as a RecordList (a list is wrapped, not copied)."""
        if isinstance(records, RecordList):
            return records
        wrapped = cls()
        wrapped._entries = records if isinstance(records, list) else list(records)
        return wrapped

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[k] for k in range(*index.indices(len(self._entries)))]
        entry = self._entries[index]
        if type(entry) is tuple:
            entry = self._entries[index] = entry[0].record(entry[1])
        return entry

    def __iter__(self) -> Iterator[CaseRecord]:
        for k in range(len(self._entries)):
            yield self[k]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # a sequence that compares by its contents

    def __repr__(self) -> str:
        return f"RecordList({len(self._entries)} records)"

    def _column(self, name: str, of_record) -> list:
        """One field of every entry, from the batches' columns where an entry is in one."""
        return [
            getattr(entry[0], name)[entry[1]] if type(entry) is tuple else of_record(entry) for entry in self._entries
        ]

    def verdicts(self) -> list[Verdict]:
        return self._column("verdicts", lambda record: record.verdict)

    def tally(self) -> Counter:
        """Cases per (check kind, verdict)."""
        if self._tally is None:
            checks = map(check_of, self._column("keys", lambda record: record.id))
            self._tally = Counter(zip(checks, self.verdicts()))
        return self._tally

    def bodies(self) -> list[str]:
        """Each record's compact JSON text without its opening brace (see ``json_text``)."""
        return self._column("bodies", lambda record: record.json_text[1:])

    def slowest(self, n: int) -> list[CaseRecord]:
        """The ``n`` slowest records of cases that ran (``tasks`` > 0), slowest first; ties in
        run order."""
        seconds = self._column("seconds", lambda record: record.seconds if record.tasks > 0 else None)
        ran = [k for k, s in enumerate(seconds) if s is not None]
        return [self[k] for k in heapq.nlargest(n, ran, key=seconds.__getitem__)]

    def unexpected_passes(self) -> list[str]:
        """The tests (case ids without their sample part) expected to fail whose cases passed:
        some ``xpass``, none ``xfail`` (PyTorch's test stops at its first failing sample, an
        expected failure; it fails as an unexpected success only if every sample passes)."""
        passed, failed = set(), set()
        for record in self.having((XPASS, XFAIL)):
            test = record.case if record.case.sample is None else dataclasses.replace(record.case, sample=None)
            (passed if record.verdict == XPASS else failed).add(test.text)
        return sorted(passed - failed)

    def having(self, verdicts: Collection[str]) -> list[CaseRecord]:
        """The records whose verdict is one of ``verdicts``, in order."""
        return [self[k] for k, verdict in enumerate(self.verdicts()) if verdict in verdicts]
