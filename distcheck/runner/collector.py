"""The run's :class:`~distcheck.runner.protocols.Sink`: it collects a record per case from the
dispatcher, tells the listener, holds bad records for reruns, and gives the records in
enumeration order at the end."""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence

from distcheck.case.first_failure import Chains
from distcheck.kinds import Status
from distcheck.records.case_record import CaseRecord, RecordBatch
from distcheck.records.listener import Listener
from distcheck.records.record_list import RecordList
from distcheck.suites.base import RUN, CaseId, CaseInfo, GroupInfo
from distcheck.suites.case_list import CaseList


class Collector:
    """The run's :class:`Sink`: record batches from any thread, kept as they came, in enumeration
    order at the end (groups as enumerated, their cases as listed; a case recorded twice: its last
    record). ``recorded``: a resumed run's records (not dispatched); ``hold``: bad records wait
    for reruns; ``expected``: whether a case's test is expected to fail (the suite's
    ``expected_to_fail``; None: none is), for :class:`~distcheck.case.first_failure.Chains`."""

    def __init__(
        self,
        listener: Listener,
        recorded: Iterable[CaseRecord] = (),
        hold: bool = False,
        expected: Callable[[CaseId], bool] | None = None,
    ):
        self.listener, self.hold = listener, hold
        self.chains = None if expected is None else Chains(expected)
        self.recorded = {r.id: r for r in recorded}
        # the enumeration's places in order: a case's key, or a group's listed keys (None until listed)
        self.places: list[str | tuple[str, ...] | None] = []
        self.groups: dict[tuple[str, str], int] = {}  # group key -> its place in the enumeration
        self.listings: dict[tuple[str, str], CaseList] = {}  # while reruns may need a group's cases
        self.known = 0  # cases enumerated or listed
        self.unlisted = 0  # groups enumerated whose listing has not arrived
        self.enumerating = True
        self.arrivals: list[RecordBatch] = []  # in the order they came
        self.count = 0  # records in them
        self.held: dict[str, tuple[CaseInfo, CaseRecord]] = {}
        self.infos: dict[str, CaseInfo] = {}  # runnable cases enumerated here, while reruns may need them
        self.lock = threading.Lock()
        self.complete = False  # set by result()

    def enumerate(self, items: Iterator[GroupInfo | CaseInfo]) -> Iterator[GroupInfo | CaseInfo]:
        """The groups and runnable cases of ``items`` not recorded yet; the other cases are
        recorded on the way."""
        for item in items:
            not_run = None
            with self.lock:
                if isinstance(item, GroupInfo):
                    self.groups[item.key] = len(self.places)
                    self.places.append(None)
                    self.unlisted += 1
                    if self.chains is not None:
                        self.chains.group(item)
                else:
                    self.places.append(item.key)
                    self.known += 1
                    if self.chains is not None and item.status == RUN:
                        not_run = self.chains.add(item.id, item.key)
                self._tell()
            if isinstance(item, GroupInfo):
                yield item
            elif not_run is not None:  # its test stopped before it: final as recorded, else not run
                with self.lock:
                    self._keep(RecordBatch([self.recorded.get(item.key, not_run)]))
            elif item.key in self.recorded:
                self.settle(RecordBatch([self.recorded[item.key]]))
            elif item.status == RUN:
                if self.hold:
                    self.infos[item.key] = item
                yield item
            else:
                self.emit(_decided([item]))
        with self.lock:
            self.enumerating = False
            self._tell()

    def _tell(self) -> None:
        self.listener.enumerated(self.known, complete=not self.enumerating and not self.unlisted)

    def listed(self, group: GroupInfo, cases: Sequence[CaseInfo]) -> None:
        cases = CaseList.of(cases)
        with self.lock:
            place = self.groups[group.key]
            before = self.places[place]
            if before is None:
                self.unlisted -= 1
            else:  # a group listed again (after a lost worker)
                self.known -= len(before)
            self.places[place] = cases.keys
            self.known += len(cases.keys)
            if self.hold:
                self.listings[group.key] = cases
            self._tell()
            if self.chains is not None:  # final: their tests stopped before them (a group listed again)
                self._keep(RecordBatch(self.chains.listed(group, cases)))
        if cases.decided:
            self.emit(_decided(cases.decided))

    def emit(self, batch: RecordBatch) -> None:
        """Records of finished cases; with ``hold``, the bad ones wait for reruns."""
        if self.hold and batch.bad:
            batch, bad = batch.without(batch.bad)
            with self.lock:
                for record in bad:
                    self.held[record.id] = (self._info(record), record)
        self.settle(batch)

    def _info(self, record: CaseRecord) -> CaseInfo:
        """The enumerated or listed case of ``record`` (a case held for reruns)."""
        info = self.infos.get(record.id)
        if info is not None:
            return info
        cases = self.listings[record.case.op, record.case.dtype]
        return cases[cases.keys.index(record.id)]

    def settle(self, batch: RecordBatch) -> None:
        """Final records: kept, and told to the listener."""
        with self.lock:
            if self.chains is not None:
                batch, released = self.chains.filter(batch)
                self._keep(RecordBatch(released))
            self._keep(batch)

    def _keep(self, batch: RecordBatch) -> None:
        if batch:
            self.arrivals.append(batch)
            self.count += len(batch)
            self.listener.recorded(batch)

    def _keys(self) -> Iterator[str]:
        """The keys of every case enumerated or listed, in order."""
        for place in self.places:
            if type(place) is str:
                yield place
            elif place is not None:
                yield from place

    def result(self) -> RecordList:
        """The records in enumeration order (and :attr:`complete`: every case has its final
        record). Made once per case, at the end: a dict of the records by key, then the keys
        in order (records of no enumerated case, which a suite listing a group differently
        twice could make, come last)."""
        with self.lock:
            latest: dict[str, tuple[RecordBatch, int]] = {}
            tally: Counter = Counter()
            for batch in self.arrivals:
                latest.update(zip(batch.keys, zip(itertools.repeat(batch), range(len(batch)))))
                tally.update(batch.tally)
            entries = [entry for entry in map(latest.get, self._keys()) if entry is not None]
            in_order = len(entries)
            if in_order < len(latest):
                enumerated = set(self._keys())
                entries += [entry for key, entry in latest.items() if key not in enumerated]
            exact = len(latest) == self.count  # no case recorded twice: the batches' tallies add up
            self.complete = not self.enumerating and not self.unlisted and not self.held and in_order == self.known
            return RecordList(entries, tally if exact else None)


def _decided(cases: Iterable[CaseInfo]) -> RecordBatch:
    """The records of cases decided without running (skipped, xfail, error)."""
    return RecordBatch(CaseRecord(case.id, Status(case.status).verdict, case.reason) for case in cases)
