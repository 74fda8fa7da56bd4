"""Serial dispatch: every case in this process, one after the other, in enumeration order.

Budgets apply as on Ray (an over-budget slow-mode case is skipped); nothing is split.
Timeouts are best effort: a SIGALRM timer interrupts the case at the next Python instruction
(gradcheck's loops are Python, so this is quick), but a single C call that never returns
cannot be interrupted in-process — use Ray for hard timeouts. The timer needs the main thread
of a POSIX process; elsewhere cases run without timeout. No case starts once ``stop`` is set.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from distcheck.runner.budget import Budget
from distcheck.runner.case_runner import run_case, timeout_record, to_record
from distcheck.runner.records import RecordBatch
from distcheck.suites.base import RUN, CaseInfo, GroupInfo, Selection, Suite

if TYPE_CHECKING:
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

    def __init__(self, suite: Suite, budget: Budget, timeout: float | None, selection: Selection | None = None):
        self.suite, self.budget, self.timeout = suite, budget, timeout
        self.selection = selection or Selection()
        self.stop = threading.Event()  # set: no further case starts

    def run(self, items: Iterator[GroupInfo | CaseInfo], sink: Sink) -> None:
        for item in items:
            if self.stop.is_set():
                return
            if isinstance(item, GroupInfo):
                listing = self.suite.list_group(item, self.selection)
                sink.listed(item, listing)
                for info in listing:
                    if self.stop.is_set():
                        return
                    if info.status == RUN:
                        self.run_one(info, sink)
            else:
                self.run_one(item, sink)

    def rerunning(self, attempt: int) -> None:
        """Reruns run in this process, as the first run did."""

    def run_one(self, info: CaseInfo, sink: Sink) -> None:
        start = time.perf_counter()
        try:
            with alarm(self.timeout):
                outcome = run_case(self.suite, info.id, info.fingerprint, self.budget)
        except CaseTimeout:
            sink.emit(RecordBatch([timeout_record(info, self.timeout, time.perf_counter() - start, tasks=1)]))
            return
        sink.emit(RecordBatch([to_record(info, outcome, tasks=1)]))
