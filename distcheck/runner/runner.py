"""The suite runner: enumerate a suite's work, dispatch it (serially or on Ray), collect a
record per case as it finishes, and hand the records to a listener (progress, reports).

The driver enumerates *groups* (an op in a dtype) from the suite's metadata; the dispatcher has
each group listed where its cases run (a worker) and reports the listing back (the
:class:`Sink`). Cases the suite does not run (skipped, xfail) are recorded as they are
enumerated or listed. A suite without groups (or a run limited to its first N cases) is
enumerated case by case on the driver. Dispatch starts with the first group while later ones
are still being enumerated.

- **Resume.** Cases already recorded (by an interrupted run, read back from its run folder) are
  not dispatched again; their records join the new ones, so that the result has every case once
  (a resumed run is enumerated case by case on the driver, to leave the recorded ones out).
- **Reruns** (``reruns`` N): a case that fails, errors or times out is held back, and after the
  dispatch runs again, up to N times, with the same seeds (cases rebuild deterministically from
  their ids) and in fresh worker processes on Ray (a new worker environment makes Ray start new
  ones); serial reruns run in this process. Passing on a rerun makes it ``flaky``, with every
  attempt in its record.
- **Stop.** Setting the ``stop`` event ends the run early (dispatchers cancel what runs); a
  signal handler may also raise :class:`Interrupted` into a case running in this thread. The
  result is then marked incomplete.
"""

from __future__ import annotations

import gc
import itertools
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from distcheck.kinds import Status
from distcheck.runner.batches import CaseList, RecordBatch
from distcheck.runner.budget import Budget, default_max_jacobian_mb
from distcheck.runner.durations import COSTLY, CostlyRule, Durations
from distcheck.runner.gpus import check_local, check_share, is_cuda
from distcheck.runner.records import BAD, FLAKY, PASS, VERDICTS, CaseRecord, RecordList
from distcheck.suites import CHECK_KINDS
from distcheck.suites.base import RUN, CaseInfo, GroupInfo, Selection, Suite, UsageError, enumerate_cases, is_grouped

FAST_BATCH, SLOW_BATCH = 32, 16  # cases per Ray task


@dataclass(frozen=True)
class RunOptions:
    """How to run: ``serial`` in this process, else on Ray (``address``: see ``ensure_ray``);
    ``timeout`` per case in seconds (None: none); ``max_jacobian_mb``: memory budget of a
    slow-mode case (None: a quarter of this machine's RAM); ``max_cases``: the first N cases
    only; ``split_seconds``: on Ray, a case estimated above this much work runs in Jacobian
    chunks over every worker, if its Jacobians take at most ``split_max_mb`` (larger ones cost
    mostly whole-Jacobian work that one process does anyway); ``batch_size``: cases per Ray
    task (None: by mode); ``durations``: recorded seconds per case (a previous run's), to
    dispatch the longest work first; ``reruns``: runs of a failing, erroring or timed-out case
    after the first (see the module's docstring); ``gpus_per_runner``: on Ray, the GPUs each
    runner (and each chunk task of a split case) asks for when the suite's device is a GPU
    (0.25: four runners share a GPU; see :mod:`.gpus`)."""

    serial: bool = False
    address: str | None = None
    timeout: float | None = 600.0
    max_jacobian_mb: float | None = None
    max_cases: int | None = None
    split_seconds: float = 4.0
    split_max_mb: float = 256.0
    batch_size: int | None = None
    durations: Durations | None = None
    reruns: int = 0
    gpus_per_runner: float = 1.0

    def __post_init__(self) -> None:
        for name in ("timeout", "max_jacobian_mb", "max_cases", "batch_size", "reruns"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise UsageError(f"RunOptions.{name} must not be negative, got {value!r}")
        if self.serial and self.address is not None:
            raise UsageError(f"RunOptions: serial=True runs in this process, address={self.address!r} names a cluster")

    def budget(self, split: bool, device: str = "cpu") -> Budget:
        """The cases' budget; on a GPU without ``max_jacobian_mb``, the device's memory decides
        where the case runs (see :meth:`Budget.on_device`)."""
        max_mb = default_max_jacobian_mb() if self.max_jacobian_mb is None else self.max_jacobian_mb
        on_device = self.max_jacobian_mb is None and device != "cpu"
        if not split:
            return Budget(max_mb * 2**20, device_memory=on_device)
        return Budget(max_mb * 2**20, self.split_seconds, self.split_max_mb * 2**20, on_device)


@dataclass
class RunResult:
    suite: str
    mode: str
    executor: str
    workers: int
    seconds: float = 0.0
    records: Sequence[CaseRecord] = field(default_factory=list)  # a list, or a RecordList (a run's)
    first_dispatch: float | None = None  # seconds from the run's start to its first task (on Ray)
    complete: bool = True  # False: stopped before every case had its verdict
    interrupted: str | None = None  # what stopped it (a signal's name), if something did
    device: str = "cpu"  # where the suite's cases ran
    placement: str | None = None  # on GPUs: how many runners on how many GPUs

    def tally(self) -> Tally:
        """The cases per (check kind, verdict), counted in one pass over the records (a run's
        :class:`RecordList` counts once; a plain list each call: a caller that reads several
        counts takes one tally)."""
        return Tally(RecordList.of(self.records).tally())

    @property
    def checks(self) -> list[str]:
        return self.tally().checks

    @property
    def failed(self) -> bool:
        return self.tally().failed

    @property
    def flaky(self) -> list[CaseRecord]:
        return RecordList.of(self.records).having((FLAKY,))

    def counts(self, check: str | None = None) -> dict[str, int]:
        return self.tally().counts(check)


@dataclass(frozen=True)
class Tally:
    """How many cases of each check kind had each verdict (of a run's records, at one time)."""

    by_kind: Counter  # (check kind, verdict) -> cases

    @property
    def checks(self) -> list[str]:
        """The check kinds present, in the canonical order."""
        present = {check for check, _ in self.by_kind}
        return [c for c in CHECK_KINDS if c in present]

    @property
    def failed(self) -> bool:
        return any(verdict in BAD for _, verdict in self.by_kind)

    @property
    def has_flaky(self) -> bool:
        return any(verdict == FLAKY for _, verdict in self.by_kind)

    def counts(self, check: str | None = None) -> dict[str, int]:
        """Cases per verdict (of one check kind, or all); ``flaky`` only in a run that has some."""
        counts = dict.fromkeys((*VERDICTS, FLAKY) if self.has_flaky else VERDICTS, 0)
        for (kind, verdict), n in self.by_kind.items():
            if check is None or kind == check:
                counts[verdict] += n
        return counts


class Listener:
    """Told about a run as it goes (a progress bar subclasses it); does nothing by default."""

    def started(self, result: RunResult) -> None:
        """The run starts (``result`` has its suite, mode, executor and workers)."""

    def enumerated(self, cases: int, complete: bool) -> None:
        """``cases`` enumerated so far; ``complete`` once they all are."""

    def recorded(self, record: CaseRecord) -> None:
        """A case has its verdict (its final one: a case held for reruns is told once settled)."""

    def recorded_many(self, records: list[CaseRecord]) -> None:
        """Several cases have their verdicts (a runner's report): :meth:`recorded` for each,
        unless the listener does better with the whole batch (one write for the run folder)."""
        for record in records:
            self.recorded(record)

    def recorded_batch(self, batch: RecordBatch) -> None:
        """Several cases have their verdicts, as a runner's batch (see :mod:`.batches`):
        :meth:`recorded_many` of its records, made for it — unless this listener has neither
        ``recorded`` nor ``recorded_many`` of its own (then there is nothing to tell, and no
        record is made)."""
        cls = type(self)
        if cls.recorded is not Listener.recorded or cls.recorded_many is not Listener.recorded_many:
            self.recorded_many(batch.records())

    def finished(self, result: RunResult) -> None:
        """The run is over."""


class Listeners(Listener):
    """Several listeners, told in turn."""

    def __init__(self, *listeners: Listener):
        self.listeners = listeners

    def started(self, result: RunResult) -> None:
        for listener in self.listeners:
            listener.started(result)

    def enumerated(self, cases: int, complete: bool) -> None:
        for listener in self.listeners:
            listener.enumerated(cases, complete)

    def recorded(self, record: CaseRecord) -> None:
        for listener in self.listeners:
            listener.recorded(record)

    def recorded_many(self, records: list[CaseRecord]) -> None:
        for listener in self.listeners:
            listener.recorded_many(records)

    def recorded_batch(self, batch: RecordBatch) -> None:
        for listener in self.listeners:
            listener.recorded_batch(batch)

    def finished(self, result: RunResult) -> None:
        for listener in self.listeners:
            listener.finished(result)


class Interrupted(BaseException):
    """Raised (by a signal handler) into a case running in the dispatching thread: the run
    stops, as when its ``stop`` event is set (a BaseException: no case catches it)."""


class Sink(Protocol):
    """Where a dispatcher sends what it learns: the listing of a group (its cases, runnable or
    decided while listing) and the records of finished cases (a list per message, or a
    runner's :class:`~distcheck.runner.batches.RecordBatch`: the driver's work is per batch)."""

    def listed(self, group: GroupInfo, cases: Sequence[CaseInfo]) -> None: ...

    def emit(self, records: list[CaseRecord]) -> None: ...

    def emit_batch(self, batch: RecordBatch) -> None: ...


class Dispatcher(Protocol):
    """Runs cases somewhere and emits a record per case (one file per dispatcher). ``items``:
    groups to list and runnable cases listed already, as :func:`work` yields them."""

    name: str
    stop: threading.Event  # set: start no further case, cancel what runs

    @property
    def workers(self) -> int: ...

    def run(self, items: Iterator[GroupInfo | CaseInfo], sink: Sink) -> None: ...


def select(suite: Suite, selection: Selection, max_cases: int | None = None) -> Iterator[CaseInfo]:
    """The suite's selected cases (all listed in this process), the first ``max_cases`` of them
    if given."""
    cases = enumerate_cases(suite, selection) if is_grouped(suite) else suite.cases(selection)
    return cases if max_cases is None else itertools.islice(cases, max_cases)


def work(
    suite: Suite, selection: Selection, max_cases: int | None = None, resumed: bool = False
) -> Iterator[GroupInfo | CaseInfo]:
    """What a run enumerates on the driver: the suite's groups and the cases decided without
    running — or every case, for a suite without groups, the first ``max_cases`` cases, or a
    resumed run."""
    if max_cases is None and not resumed and is_grouped(suite):
        return suite.groups(selection)
    return select(suite, selection, max_cases)


def make_dispatcher(suite: Suite, options: RunOptions, selection: Selection) -> Dispatcher:
    """The run's dispatcher. UsageError if the suite's device is not there: a GPU this machine
    lacks (serial, at once), or the Ray cluster (when the dispatcher first counts its workers,
    before any case runs)."""
    device = getattr(suite, "device", "cpu")
    if options.serial:
        from distcheck.runner.serial import SerialDispatcher

        check_local(device)
        return SerialDispatcher(suite, options.budget(split=False, device=device), options.timeout, selection)
    from distcheck.runner.ray_dispatch import RayDispatcher

    check_share(options.gpus_per_runner)
    slow = suite.mode == "slow"
    return RayDispatcher(
        suite,
        options.budget(split=True, device=device),
        options.timeout,
        options.address,
        options.batch_size or (SLOW_BATCH if slow else FAST_BATCH),
        selection,
        CostlyRule(min_cost=COSTLY if slow else None),
        options.durations,
        gpus_per_runner=options.gpus_per_runner if is_cuda(device) else None,
    )


def placement_of(dispatcher: Dispatcher) -> str | None:
    """How the dispatcher's runners sit on GPUs ("4 runner(s) on 1 GPU(s) (0.25 GPU each)"), if they do."""
    return getattr(dispatcher, "placement", None)


class _Collector:
    """The run's :class:`Sink`: records from any thread, in enumeration order at the end (groups
    in the order enumerated, each group's cases in the order listed; a case recorded twice: its
    last record). Records arrive one by one or in a runner's batches (kept as they came: no
    object per case, see :mod:`.batches`). ``recorded``: the records of a resumed run (their
    cases are not dispatched); ``hold``: bad records wait for reruns instead of going to the
    listener."""

    def __init__(self, listener: Listener, recorded: Iterable[CaseRecord] = (), hold: bool = False):
        self.listener, self.hold = listener, hold
        self.recorded = {r.id: r for r in recorded}
        # the enumeration's places in order: a case's key, or a group's listed keys (None until listed)
        self.places: list[str | tuple[str, ...] | None] = []
        self.groups: dict[tuple[str, str], int] = {}  # group key -> its place in the enumeration
        self.listings: dict[tuple[str, str], CaseList] = {}  # while reruns may need a group's cases
        self.known = 0  # cases enumerated or listed
        self.unlisted = 0  # groups enumerated whose listing has not arrived
        self.enumerating = True
        self.arrivals: list[CaseRecord | RecordBatch] = []  # in the order they came
        self.count = 0  # records in them
        self.held: dict[str, tuple[CaseInfo, CaseRecord]] = {}
        self.infos: dict[str, CaseInfo] = {}  # runnable cases enumerated here, while reruns may need them
        self.lock = threading.Lock()
        self.complete = False  # set by result()

    def enumerate(self, items: Iterator[GroupInfo | CaseInfo]) -> Iterator[GroupInfo | CaseInfo]:
        """The groups and runnable cases of ``items`` not recorded yet; the other cases are
        recorded on the way."""
        for item in items:
            with self.lock:
                if isinstance(item, GroupInfo):
                    self.groups[item.key] = len(self.places)
                    self.places.append(None)
                    self.unlisted += 1
                else:
                    self.places.append(item.key)
                    self.known += 1
                self._tell()
            if isinstance(item, GroupInfo):
                yield item
            elif item.key in self.recorded:
                self.settle([self.recorded[item.key]])
            elif item.status == RUN:
                if self.hold:
                    self.infos[item.key] = item
                yield item
            else:
                self.emit([CaseRecord(item.id, Status(item.status).verdict, item.reason)])
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
        decided = [CaseRecord(case.id, Status(case.status).verdict, case.reason) for case in cases.decided]
        if decided:
            self.emit(decided)

    def emit(self, records: list[CaseRecord]) -> None:
        if self.hold:
            with self.lock:
                for record in records:
                    if record.verdict in BAD:
                        self.held[record.id] = (self._info(record), record)
            records = [record for record in records if record.verdict not in BAD]
        self.settle(records)

    def emit_batch(self, batch: RecordBatch) -> None:
        if self.hold and batch.bad:
            batch, bad = batch.without(batch.bad)
            self.emit(bad)
        if batch:
            with self.lock:
                self.arrivals.append(batch)
                self.count += len(batch)
                self.listener.recorded_batch(batch)

    def _info(self, record: CaseRecord) -> CaseInfo:
        """The enumerated or listed case of ``record`` (a case held for reruns)."""
        info = self.infos.get(record.id)
        if info is not None:
            return info
        cases = self.listings[record.case.op, record.case.dtype]
        return cases[cases.keys.index(record.id)]

    def settle(self, records: list[CaseRecord]) -> None:
        if not records:
            return
        with self.lock:
            self.arrivals.extend(records)
            self.count += len(records)
            self.listener.recorded_many(records)

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
            latest: dict[str, CaseRecord | tuple[RecordBatch, int]] = {}
            tally: Counter = Counter()
            for arrival in self.arrivals:
                if type(arrival) is RecordBatch:
                    latest.update(zip(arrival.keys, zip(itertools.repeat(arrival), range(len(arrival)))))
                    tally.update(arrival.tally)
                else:
                    latest[arrival.id] = arrival
                    tally[arrival.case.check, arrival.verdict] += 1
            entries = [entry for entry in map(latest.get, self._keys()) if entry is not None]
            in_order = len(entries)
            if in_order < len(latest):
                enumerated = set(self._keys())
                entries += [entry for key, entry in latest.items() if key not in enumerated]
            exact = len(latest) == self.count  # no case recorded twice: the batches' tallies add up
            self.complete = not self.enumerating and not self.unlisted and not self.held and in_order == self.known
            return RecordList(entries, tally if exact else None)


class _Outcomes:
    """A sink that keeps the records of a rerun."""

    def __init__(self):
        self.records: list[CaseRecord] = []

    def listed(self, group: GroupInfo, cases: Sequence[CaseInfo]) -> None:
        raise AssertionError("a rerun dispatches listed cases only")

    def emit(self, records: list[CaseRecord]) -> None:
        self.records.extend(records)

    def emit_batch(self, batch: RecordBatch) -> None:
        self.records.extend(batch.records())


def _attempt(record: CaseRecord) -> dict[str, object]:
    return {"verdict": record.verdict, "seconds": round(record.seconds, 6), "message": record.message}


def rerun(dispatcher: Dispatcher, collector: _Collector, reruns: int) -> None:
    """Run the held (bad) cases again, up to ``reruns`` times each, in fresh workers: a case
    that passes once is ``flaky``; one that never does keeps its first verdict. Every attempt
    goes into the record."""
    attempts = {key: [_attempt(record)] for key, (_, record) in collector.held.items()}
    for k in range(1, reruns + 1):
        if not collector.held or dispatcher.stop.is_set():
            break
        if hasattr(dispatcher, "worker_env"):
            dispatcher.worker_env = {"DISTCHECK_RERUN": str(k)}  # a new environment: new worker processes
        outcomes = _Outcomes()
        dispatcher.run(iter([info for info, _ in collector.held.values()]), outcomes)
        for record in outcomes.records:
            attempts[record.id].append(_attempt(record))
            if record.verdict == PASS:
                _, first = collector.held.pop(record.id)
                message = f"passed on rerun {k} of {reruns}; the first run said {first.verdict}: {first.message}"
                collector.settle([replace(first, verdict=FLAKY, message=message, attempts=tuple(attempts[record.id]))])
    if dispatcher.stop.is_set():
        return  # held cases have no final verdict: a resume runs them again
    for key, (_, first) in list(collector.held.items()):
        del collector.held[key]
        collector.settle([replace(first, attempts=tuple(attempts[key]))])


def run_suite(
    suite: Suite,
    selection: Selection,
    options: RunOptions | None = None,
    listener: Listener | None = None,
    *,
    recorded: Iterable[CaseRecord] = (),
    stop: threading.Event | None = None,
) -> RunResult:
    """Run the selected cases of ``suite``; a record per case, in enumeration order.
    ``recorded``: records of an interrupted run of the same cases (not run again); ``stop``:
    set it (from another thread, a signal handler) to end the run early, incomplete.

    Raises :class:`~distcheck.suites.base.UsageError` (before running anything) for names
    the suite does not know, or a selection of no case."""
    options = options or RunOptions()
    listener = listener or Listener()
    recorded = list(recorded)
    start = time.perf_counter()
    items = work(suite, selection, options.max_cases, resumed=bool(recorded))
    first = next(items, None)  # unknown names raise here, in this thread
    if first is None:
        raise UsageError("no case matches the selection")
    dispatcher = make_dispatcher(suite, options, selection)
    if stop is not None:
        dispatcher.stop = stop
    result = RunResult(suite.name, suite.mode, dispatcher.name, dispatcher.workers)
    result.device, result.placement = getattr(suite, "device", "cpu"), placement_of(dispatcher)
    listener.started(result)
    collector = _Collector(listener, recorded, hold=options.reruns > 0)
    everything = itertools.chain([first], items)
    # What is alive now (the suite's database, the libraries: ~400,000 objects for op_db) stays
    # alive during the run: out of the garbage collector's sight, a full collection is not 0.2 s.
    gc.freeze()
    try:
        dispatcher.run(collector.enumerate(everything), collector)
        rerun(dispatcher, collector, options.reruns)
    except Interrupted:
        dispatcher.stop.set()
    finally:
        gc.unfreeze()
    result.records = collector.result()
    result.complete = collector.complete
    result.seconds = time.perf_counter() - start
    first_dispatch = getattr(dispatcher, "first_dispatch", None)
    result.first_dispatch = None if first_dispatch is None else first_dispatch - start
    listener.finished(result)
    return result
