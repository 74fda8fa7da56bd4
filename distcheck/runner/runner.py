"""The suite runner: enumerate a suite's cases, dispatch them (serially or on Ray), collect a
record per case as it finishes, and hand the records to a listener (progress, reports).

Cases the suite does not run (skipped, xfail) are recorded as they are enumerated; runnable
ones go to the dispatcher, which starts on the first while later ones are still enumerated.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from distcheck.runner.budget import Budget, default_max_jacobian_mb
from distcheck.runner.records import BAD, VERDICTS, CaseRecord
from distcheck.suites.base import RUN, CaseInfo, Selection, Suite

FAST_BATCH, SLOW_BATCH = 32, 16  # cases per Ray task


@dataclass(frozen=True)
class RunOptions:
    """How to run: ``serial`` in this process, else on Ray (``address``: see ``ensure_ray``);
    ``timeout`` per case in seconds (None: none); ``max_jacobian_mb``: memory budget of a
    slow-mode case (None: a quarter of this machine's RAM); ``max_cases``: the first N cases
    only; ``split_seconds``: on Ray, a case estimated above this much work runs in Jacobian
    chunks over every worker, if its Jacobians take at most ``split_max_mb`` (larger ones cost
    mostly whole-Jacobian work that one process does anyway); ``batch_size``: cases per Ray
    task (None: by mode)."""

    serial: bool = False
    address: str | None = None
    timeout: float | None = 600.0
    max_jacobian_mb: float | None = None
    max_cases: int | None = None
    split_seconds: float = 4.0
    split_max_mb: float = 256.0
    batch_size: int | None = None

    def budget(self, split: bool) -> Budget:
        max_mb = default_max_jacobian_mb() if self.max_jacobian_mb is None else self.max_jacobian_mb
        if not split:
            return Budget(max_mb * 2**20)
        return Budget(max_mb * 2**20, self.split_seconds, self.split_max_mb * 2**20)


@dataclass
class RunResult:
    suite: str
    mode: str
    executor: str
    workers: int
    seconds: float = 0.0
    records: list[CaseRecord] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(r.verdict in BAD for r in self.records)

    def counts(self, check: str | None = None) -> dict[str, int]:
        """Cases per verdict (of one check kind, or all)."""
        counts = dict.fromkeys(VERDICTS, 0)
        for r in self.records:
            if check is None or r.case.check == check:
                counts[r.verdict] += 1
        return counts


class Listener:
    """Told about a run as it goes (a progress bar subclasses it); does nothing by default."""

    def started(self, result: RunResult) -> None:
        """The run starts (``result`` has its suite, mode, executor and workers)."""

    def enumerated(self, cases: int, complete: bool) -> None:
        """``cases`` enumerated so far; ``complete`` once they all are."""

    def recorded(self, record: CaseRecord) -> None:
        """A case has its verdict."""

    def finished(self, result: RunResult) -> None:
        """The run is over."""


class Dispatcher(Protocol):
    """Runs cases somewhere and emits a record per case (one file per dispatcher)."""

    name: str

    @property
    def workers(self) -> int: ...

    def run(self, cases: Iterator[CaseInfo], emit: Callable[[CaseRecord], None]) -> None: ...


def select(suite: Suite, selection: Selection, max_cases: int | None = None) -> Iterator[CaseInfo]:
    """The suite's selected cases, the first ``max_cases`` of them if given."""
    cases = suite.cases(selection)
    return cases if max_cases is None else itertools.islice(cases, max_cases)


def make_dispatcher(suite: Suite, options: RunOptions) -> Dispatcher:
    if options.serial:
        from distcheck.runner.serial import SerialDispatcher

        return SerialDispatcher(suite, options.budget(split=False), options.timeout)
    from distcheck.runner.ray_dispatch import RayDispatcher

    batch = options.batch_size or (SLOW_BATCH if suite.mode == "slow" else FAST_BATCH)
    return RayDispatcher(suite, options.budget(split=True), options.timeout, options.address, batch)


class _Collector:
    """Records by case, from any thread, in enumeration order at the end."""

    def __init__(self, listener: Listener):
        self.listener = listener
        self.order: dict[str, int] = {}
        self.records: dict[str, CaseRecord] = {}
        self.lock = threading.Lock()

    def enumerate(self, cases: Iterator[CaseInfo]) -> Iterator[CaseInfo]:
        """The runnable cases of ``cases``; the others are recorded on the way."""
        for case in cases:
            with self.lock:
                self.order[case.key] = len(self.order)
                self.listener.enumerated(len(self.order), complete=False)
            if case.status == RUN:
                yield case
            else:
                self.emit(CaseRecord(case.id, case.status, case.reason))
        with self.lock:
            self.listener.enumerated(len(self.order), complete=True)

    def emit(self, record: CaseRecord) -> None:
        with self.lock:
            self.records[record.id] = record
            self.listener.recorded(record)

    def in_order(self) -> list[CaseRecord]:
        return sorted(self.records.values(), key=lambda r: self.order[r.id])


def run_suite(
    suite: Suite, selection: Selection, options: RunOptions | None = None, listener: Listener | None = None
) -> RunResult:
    """Run the selected cases of ``suite``; a record per case, in enumeration order.

    Raises :class:`~distcheck.suites.base.UsageError` (before running anything) for names
    the suite does not know."""
    options = options or RunOptions()
    listener = listener or Listener()
    start = time.perf_counter()
    cases = select(suite, selection, options.max_cases)
    first = next(cases, None)  # unknown names raise here, in this thread
    dispatcher = make_dispatcher(suite, options)
    result = RunResult(suite.name, suite.mode, dispatcher.name, dispatcher.workers)
    listener.started(result)
    collector = _Collector(listener)
    everything = itertools.chain([first] if first is not None else [], cases)
    dispatcher.run(collector.enumerate(everything), collector.emit)
    result.records = collector.in_order()
    result.seconds = time.perf_counter() - start
    listener.finished(result)
    return result
