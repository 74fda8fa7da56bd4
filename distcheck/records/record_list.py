"""A run's records in order (a :class:`RecordList`): entries of the record batches they came in,
read from the batches' columns without making a record per case."""

from __future__ import annotations

import dataclasses
import heapq
import itertools
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Sequence

from distcheck.kinds import Verdict
from distcheck.records.case_record import XFAIL, XPASS, CaseRecord, RecordBatch
from distcheck.reduce.counts import BatchCounts
from distcheck.suites.base import check_of


class RecordList(Sequence[CaseRecord]):
    """A run's records, in order: each entry is ``(batch, j)``, the ``j``-th record of a
    :class:`RecordBatch`, made when it is first read. What the end of a run reads of every
    case — the tally, the JSON texts, the slowest and the bad cases — comes from the batches'
    columns, without making the records. ``tally``: the tally of the entries, when the maker
    knows it (summed from the batches')."""

    __slots__ = ("_entries", "_tally")

    def __init__(self, entries: Iterable[tuple[RecordBatch, int]] = (), tally: Counter | None = None):
        self._entries = list(entries)
        self._tally = tally

    @classmethod
    def of(cls, records: Sequence[CaseRecord]) -> RecordList:
        """``records`` as a RecordList (a run's is itself; other records become one batch)."""
        if isinstance(records, RecordList):
            return records
        batch = RecordBatch(records)
        return cls(zip(itertools.repeat(batch), range(len(batch))))

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[k] for k in range(*index.indices(len(self._entries)))]
        batch, j = self._entries[index]
        return batch.record(j)

    def __iter__(self) -> Iterator[CaseRecord]:
        for batch, j in self._entries:
            yield batch.record(j)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # a sequence that compares by its contents

    def __repr__(self) -> str:
        return f"RecordList({len(self._entries)} records)"

    def _column(self, name: str) -> list:
        """One column of every entry's batch, in order."""
        return [getattr(batch, name)[j] for batch, j in self._entries]

    def verdicts(self) -> list[Verdict]:
        return self._column("verdicts")

    def tally(self) -> Counter:
        """Cases per (check kind, verdict)."""
        if self._tally is None:
            self._tally = Counter(zip(map(check_of, self._column("keys")), self.verdicts()))
        return self._tally

    def bodies(self) -> list[str]:
        """Each record's compact JSON text without its opening brace (see ``json_text``)."""
        return self._column("bodies")

    def slowest(self, n: int) -> list[CaseRecord]:
        """The ``n`` slowest records of cases that ran (``tasks`` > 0), slowest first; ties in
        run order."""
        seconds = [batch.seconds[j] if batch.tasks[j] > 0 else None for batch, j in self._entries]
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

    def batch_counts(self) -> BatchCounts:
        """The records' batch counts added up (from the batches' columns)."""
        return BatchCounts.total(
            None if (column := batch.batch_counts) is None else column[j] for batch, j in self._entries
        )

    def having(self, verdicts: Collection[str]) -> list[CaseRecord]:
        """The records whose verdict is one of ``verdicts``, in order."""
        return [self[k] for k, verdict in enumerate(self.verdicts()) if verdict in verdicts]
