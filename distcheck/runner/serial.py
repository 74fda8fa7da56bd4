"""Serial dispatch: every case in this process, in enumeration order. Budgets apply as on Ray
(an over-budget slow-mode case is skipped); nothing is split. Timeouts are best effort: a
SIGALRM timer (the main thread of a POSIX process; elsewhere none) interrupts the case at its
next Python instruction, never inside a C call that does not return — use Ray for hard
timeouts. No case starts once ``stop`` is set.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from distcheck.case.first_failure import Stops
from distcheck.case.run import recorded, run_case, timeout_record
from distcheck.records.case_record import RecordBatch
from distcheck.suites.base import RUN, CaseInfo, GroupInfo

if TYPE_CHECKING:
    from distcheck.runner.options import RunConfig
    from distcheck.runner.protocols import Sink


class CaseTimeout(BaseException):
    """Raised in a case that ran out of time (a BaseException: no `except Exception` on the way
    swallows it)."""


@contextlib.contextmanager
def alarm(seconds: float | None) -> Iterator[None]:
    """Raise :class:`CaseTimeout` in this thread after ``seconds`` (if a timer is possible here)."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if seconds is None or not usable:
        yield
        return

    def expire(signum, frame):
        raise CaseTimeout

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class SerialDispatcher:
    name = "serial"
    workers = 1
    first_dispatch = None  # (cases start in this process: nothing to wait for)
    placement = None

    def __init__(self):
        self.stop = threading.Event()  # set: no further case starts

    def run(self, config: RunConfig, items: Iterator[GroupInfo | CaseInfo], sink: Sink) -> None:
        stops = Stops()  # tests failed as expected: their later samples are not run
        for item in items:
            if self.stop.is_set():
                return
            if isinstance(item, GroupInfo):
                listing = config.suite.list_group(item, config.selection)
                sink.listed(item, listing)
                for info in listing:
                    if self.stop.is_set():
                        return
                    if info.status == RUN:
                        self.run_one(config, info, sink, stops)
            else:
                self.run_one(config, item, sink, stops)

    def run_one(self, config: RunConfig, info: CaseInfo, sink: Sink, stops: Stops) -> None:
        skipped = stops.skipped(info.id)
        if skipped is not None:
            sink.emit(RecordBatch([skipped]))
            return
        start = time.perf_counter()
        try:
            with alarm(config.timeout):
                outcome = run_case(config.suite, info.id, info.fingerprint, config.budget, vectorize=config.vectorize)
        except CaseTimeout:
            sink.emit(RecordBatch([timeout_record(info, config.timeout, time.perf_counter() - start)]))
            return
        stops.note(info.id, outcome.verdict)
        record, blocks = recorded(info, outcome, 1, config.keeps_blocks)
        config.store(blocks)
        sink.emit(RecordBatch([record]))
