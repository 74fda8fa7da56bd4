"""What travels between the runners and the driver of a Ray run, in the shape that costs the
driver least: it hears of every case of a run, so it must not make (or unpickle) an object per
case where it only has to count, name, order or write the cases.

- :class:`CaseList`: cases of a group's listing, or of a batch of work, pickled as their id texts
  and one blob of the :class:`~distcheck.suites.base.CaseInfo` objects (made once, where the cases
  were made); the objects are unpickled only where they are read (a runner, which runs them; the
  driver only when a runner is lost or a case is split).
- :class:`RecordBatch`: the records of the cases a runner finished since its last report, made
  on the worker, as columns: their id texts, verdicts, messages, seconds, estimates, and each
  record's JSON text without its opening brace (so that the run folder's lines and the JSON
  report's cases are each one join of them, on the driver); with the batch's tally of check
  kinds and verdicts, and which of its records are bad. A :class:`~distcheck.runner.records.CaseRecord`
  is made only when one is asked for (:meth:`RecordBatch.record`).

Measured offline (``benchmarks/bench_driver.py --offline``: the driver's handling of runner
reports of 20,000 cases, then its run folder, summary and reports): with an object per case the
driver took 4.91 µs a case, with these 1.82 µs; at 64 workers on 2 cores (``--replay``) 0.0200
against 0.0132 ms.
"""

from __future__ import annotations

import pickle
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from distcheck.runner.records import BAD, CaseRecord
from distcheck.suites.base import RUN, CaseId, CaseInfo, check_of


class CaseList(Sequence[CaseInfo]):
    """Cases in order (see the module's doc). ``keys``: their id texts; ``decided``: those not
    to run (skipped, xfail, error: a listing's), as objects. Indexing unpickles the cases, once."""

    __slots__ = ("keys", "decided", "_infos", "_blob", "_source")

    def __init__(self, infos: Iterable[CaseInfo] = ()):
        self._infos: tuple[CaseInfo, ...] | None = tuple(infos)
        self._blob: bytes | None = None
        self._source: tuple[CaseList, tuple[int, ...]] | None = None
        self.keys: tuple[str, ...] = tuple(info.key for info in self._infos)
        self.decided: tuple[CaseInfo, ...] = tuple(info for info in self._infos if info.status != RUN)

    @classmethod
    def of(cls, cases: Sequence[CaseInfo]) -> CaseList:
        return cases if isinstance(cases, CaseList) else cls(cases)

    @classmethod
    def _load(cls, keys: tuple[str, ...], decided: tuple[CaseInfo, ...], blob: bytes) -> CaseList:
        cases = object.__new__(cls)
        cases.keys, cases.decided, cases._blob, cases._infos, cases._source = keys, decided, blob, None, None
        return cases

    def __reduce__(self):
        if self._blob is None:
            self._blob = pickle.dumps(self.infos, protocol=pickle.HIGHEST_PROTOCOL)
        return CaseList._load, (self.keys, self.decided, self._blob)

    def take(self, indices: Sequence[int]) -> CaseList:
        """The cases at ``indices``, in that order (unpickled from this list when first read)."""
        cases = object.__new__(CaseList)
        cases.keys = tuple(self.keys[k] for k in indices)
        chosen = set(cases.keys) if self.decided else ()
        cases.decided = tuple(info for info in self.decided if info.key in chosen)
        cases._blob, cases._infos, cases._source = None, None, (self, tuple(indices))
        return cases

    @property
    def infos(self) -> tuple[CaseInfo, ...]:
        if self._infos is None:
            if self._source is not None:
                parent, indices = self._source
                every = parent.infos
                self._infos = tuple(every[k] for k in indices)
            else:
                self._infos = pickle.loads(self._blob)
        return self._infos

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, index):
        return self.infos[index]

    def __iter__(self):
        return iter(self.infos)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # a sequence that compares by its contents

    def __repr__(self) -> str:
        return f"CaseList({list(self.keys)!r})"


class RecordBatch:
    """Records of finished cases as columns (see the module's doc). Made on a worker from
    :meth:`CaseRecord.wire` tuples (records of one task, without Jacobian blocks or attempts)."""

    __slots__ = ("keys", "verdicts", "messages", "seconds", "estimates", "bodies", "tally", "bad")

    def __init__(self, keys: Sequence[str] = (), wires: Sequence[tuple] = ()):
        self.keys = list(keys)
        self.verdicts = [w[0] for w in wires]
        self.messages = [w[1] for w in wires]
        self.seconds = [w[2] for w in wires]
        estimates = [w[3] for w in wires]
        self.estimates = estimates if any(e is not None for e in estimates) else None
        self.bodies = [w[4][1:] for w in wires]  # the JSON text without its "{"
        self._summarize()

    def _summarize(self) -> None:
        """The batch's tally of (check kind, verdict) and its bad records, from its columns."""
        self.tally = dict(Counter(zip(map(check_of, self.keys), self.verdicts)))
        self.bad = tuple(j for j, verdict in enumerate(self.verdicts) if verdict in BAD)

    def __reduce__(self):
        return _load_batch, tuple(getattr(self, name) for name in RecordBatch.__slots__)

    def __len__(self) -> int:
        return len(self.keys)

    def __bool__(self) -> bool:
        return bool(self.keys)

    def record(self, j: int) -> CaseRecord:
        """The ``j``-th record, made now."""
        estimate = None if self.estimates is None else self.estimates[j]
        wire = (self.verdicts[j], self.messages[j], self.seconds[j], estimate, "{" + self.bodies[j])
        return CaseRecord.from_wire(CaseId.parse(self.keys[j]), wire)

    def records(self) -> list[CaseRecord]:
        return [self.record(j) for j in range(len(self.keys))]

    def without(self, indices: Iterable[int]) -> tuple[RecordBatch, list[CaseRecord]]:
        """This batch less the records at ``indices``, and those records (made now)."""
        out = set(indices)
        kept = [j for j in range(len(self.keys)) if j not in out]
        rest = object.__new__(RecordBatch)
        for name in ("keys", "verdicts", "messages", "seconds", "bodies"):
            column = getattr(self, name)
            setattr(rest, name, [column[j] for j in kept])
        rest.estimates = None if self.estimates is None else [self.estimates[j] for j in kept]
        rest._summarize()
        return rest, [self.record(j) for j in sorted(out)]

    def __repr__(self) -> str:
        return f"RecordBatch({len(self.keys)} records: {self.tally})"


def _load_batch(*columns: Any) -> RecordBatch:
    batch = object.__new__(RecordBatch)
    for name, column in zip(RecordBatch.__slots__, columns):
        setattr(batch, name, column)
    return batch
