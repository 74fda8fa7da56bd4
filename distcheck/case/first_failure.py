"""A test expected to fail stops at its first failing sample, as PyTorch's test does: its later
samples are not run, and are recorded ``skipped`` with the sample that failed. The test's
outcome is the same (it failed as expected); the work on its later samples is saved.

The rule is applied twice, so that the records never depend on where or in which order the
cases ran:

- where cases run one after the other (a runner's item, a serial run), :class:`Stops` skips a
  test's cases after one of its samples failed as expected there: work saved only;
- in the collector, :class:`Chains` releases the records of a test expected to fail (as its
  suite's ``expected_to_fail`` says) in sample order: the first ``xfail`` in that order stops
  the test, and every later sample's record is the not-run one, whatever ran (on Ray, a later
  sample may have run elsewhere, before or after). A record waits for its test's earlier
  samples; so the records a run folder holds of such a test are always the first ones, and a
  resumed run goes on from them.

A case of such a test recorded twice (a lost worker's case run again) keeps its last record,
unless the test stopped before it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from distcheck.records.case_record import SKIPPED, XFAIL, CaseRecord, RecordBatch
from distcheck.suites.base import CaseId, GroupInfo, check_of, group_of
from distcheck.suites.case_list import CaseList


def test_of(case: CaseId) -> tuple:
    """The test a case is a sample of: its id less the sample."""
    return case.op, case.dtype, case.check, case.device


def not_run(case: CaseId, failed: int | None) -> CaseRecord:
    """The record of a sample not run: its test failed as expected at sample ``failed``."""
    return CaseRecord(
        case,
        SKIPPED,
        f"not run: its test failed as expected at sample {failed} (PyTorch's test stops at its first failing sample)",
    )


class Stops:
    """The tests seen failing as expected where cases run one after the other: a later sample of
    one is skipped (see the module)."""

    def __init__(self):
        self.failed: dict[tuple, int] = {}  # test -> its first failing sample seen here

    def skipped(self, case: CaseId) -> CaseRecord | None:
        """The not-run record of ``case`` if a sample of its test before it failed as expected here."""
        failed = self.failed.get(test_of(case)) if self.failed else None
        if failed is None or case.sample is None or case.sample <= failed:
            return None
        return not_run(case, failed)

    def note(self, case: CaseId, verdict: str) -> None:
        """``case`` ran with ``verdict``."""
        if verdict == XFAIL and case.sample is not None:
            test = test_of(case)
            self.failed[test] = min(case.sample, self.failed.get(test, case.sample))


@dataclass
class _Chain:
    """A test expected to fail: its samples' ids in order, their records as they arrive, the
    first not yet released (``next``), and the position of its first ``xfail`` (``stopped``)."""

    ids: list[CaseId] = field(default_factory=list)
    records: list[CaseRecord | None] = field(default_factory=list)
    next: int = 0
    stopped: int | None = None

    def failed_sample(self) -> int | None:
        return self.ids[self.stopped].sample

    def arrive(self, position: int, record: CaseRecord) -> list[CaseRecord]:
        """The records released by ``record`` (of the sample at ``position``), in order."""
        if position < self.next:  # released already
            return [record] if self.stopped is None or position <= self.stopped else []
        self.records[position] = record
        out = []
        while self.next < len(self.ids) and self.records[self.next] is not None:
            here = self.records[self.next]
            self.records[self.next] = None
            out.append(here)
            if here.verdict == XFAIL:
                self.stopped = self.next
                out += [not_run(case, self.failed_sample()) for case in self.ids[self.next + 1 :]]
                self.next = len(self.ids)
                break
            self.next += 1
        return out


class Chains:
    """The collector's side (see the module): ``expected(case)`` says whether a case's test is
    expected to fail (asked once per test). The driver hears of every case, so ids are parsed
    only for the check kinds expected to fail, which the suite tells from the group; and a record
    that comes before its group's listing (another runner may run a group's cases before the
    driver hears the lister) waits for it when its group has such kinds."""

    def __init__(self, expected: Callable[[CaseId], bool]):
        self.expected = expected
        self.known: dict[tuple, bool] = {}  # (op, dtype, check) -> expected to fail
        self.chains: dict[tuple, _Chain] = {}  # a test expected to fail -> its chain
        self.members: dict[str, tuple[_Chain, int]] = {}  # a case's key -> its chain and place
        self.unlisted: dict[tuple[str, str], frozenset[str]] = {}  # (op, dtype) -> its kinds expected to fail
        self.early: dict[str, CaseRecord] = {}  # records of an unlisted group's cases of those kinds

    def _expected(self, case: CaseId) -> bool:
        kind = case.op, case.dtype, case.check
        if kind not in self.known:
            self.known[kind] = bool(self.expected(case))
        return self.known[kind]

    def _kinds(self, group: GroupInfo) -> frozenset[str]:
        """The group's check kinds expected to fail."""
        return frozenset(c for c in group.checks if self._expected(CaseId(group.suite, group.op, group.dtype, c)))

    def group(self, group: GroupInfo) -> None:
        """A group enumerated, to be listed."""
        kinds = self._kinds(group)
        if kinds:
            self.unlisted[group.key] = kinds

    def add(self, case: CaseId, key: str) -> CaseRecord | None:
        """A runnable case enumerated or listed (``key``: its id's text), in its test's sample
        order; its not-run record if its test stopped already (the case need not run)."""
        if key in self.members or not self._expected(case):
            return None
        chain = self.chains.setdefault(test_of(case), _Chain())
        self.members[key] = (chain, len(chain.ids))
        chain.ids.append(case)
        chain.records.append(None)
        if chain.stopped is None:
            return None
        chain.next = len(chain.ids)  # a sample listed after its test stopped (a resumed run's)
        return not_run(case, chain.failed_sample())

    def listed(self, group: GroupInfo, cases: CaseList) -> list[CaseRecord]:
        """:meth:`add` for the runnable cases of a group's listing; the final records this makes:
        not-run ones (a group listed again after its test stopped) and those of records that
        came early."""
        kinds = self.unlisted.pop(group.key, None)
        if kinds is None:  # listed again
            kinds = self._kinds(group)
        if not kinds:
            return []
        decided = {case.key for case in cases.decided}
        mine = [key for key in cases.keys if check_of(key) in kinds and key not in decided]
        out = [record for record in (self.add(CaseId.parse(key), key) for key in mine) if record is not None]
        for key in mine:
            if key in self.early:
                out += self._arrive(self.early.pop(key))
        return out

    def _arrive(self, record: CaseRecord) -> list[CaseRecord]:
        chain, position = self.members[record.id]
        return chain.arrive(position, record)

    def _early(self, key: str) -> bool:
        """Whether ``key`` is a case of a group not listed yet, of a kind expected to fail."""
        kinds = self.unlisted.get(group_of(key))
        return kinds is not None and check_of(key) in kinds

    def filter(self, batch: RecordBatch) -> tuple[RecordBatch, list[CaseRecord]]:
        """``batch`` less the records of tests expected to fail, and the final records those make."""
        if not (self.members or self.unlisted):
            return batch, []
        members, early = self.members, self.unlisted and self._early
        mine = [j for j, key in enumerate(batch.keys) if key in members or (early and early(key))]
        if not mine:
            return batch, []
        rest, records = batch.without(mine)
        released: list[CaseRecord] = []
        for record in records:
            if record.id in members:
                released += self._arrive(record)
            else:
                self.early[record.id] = record
        return rest, released
