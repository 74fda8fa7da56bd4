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
from collections.abc import Callable, Iterator

from distcheck.runner.budget import Budget
from distcheck.runner.case_runner import run_case, timeout_record, to_record
from distcheck.runner.records import CaseRecord
from distcheck.suites.base import CaseInfo, Suite


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

    def __init__(self, suite: Suite, budget: Budget, timeout: float | None):
        self.suite, self.budget, self.timeout = suite, budget, timeout
        self.stop = threading.Event()  # set: no further case starts

    def run(self, cases: Iterator[CaseInfo], emit: Callable[[CaseRecord], None]) -> None:
        for info in cases:
            if self.stop.is_set():
                return
            start = time.perf_counter()
            try:
                with alarm(self.timeout):
                    outcome = run_case(self.suite, info.id, info.fingerprint, self.budget)
            except CaseTimeout:
                emit(timeout_record(info, self.timeout, time.perf_counter() - start, tasks=1))
                continue
            emit(to_record(info, outcome, tasks=1))
