"""Split cases: a case too large for one task runs on the driver as ``distcheck.gradcheck`` on
the Ray executor, which cuts its Jacobians into column and row chunks over every worker.

Split cases run one at a time in a driver thread, and only once enumeration is over: the
driver's global RNG is process-wide, and the samples the enumeration generates, like the
random grad-outputs of a gradgradcheck, must not interleave with another thread's draws (each
split case uses the whole cluster anyway). A timed-out split case has its Ray tasks cancelled;
driver-side work in progress (planning, the final comparison) cannot be interrupted and
finishes first: cases queued behind it wait, and are reported ``error`` if it never returns.
"""

from __future__ import annotations

import collections
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from distcheck.executors.ray_executor import RayExecutor, RayResults
from distcheck.plan.subject import Subject
from distcheck.plan.units import Unit
from distcheck.runner.budget import Budget
from distcheck.runner.case_runner import run_case, timeout_record, to_record
from distcheck.runner.judge import distcheck_checker
from distcheck.runner.records import ERROR, CaseRecord
from distcheck.suites.base import CaseInfo, Suite


class CaseCancelled(RuntimeError):
    """The case ran out of time: its check may submit no more tasks."""


class TrackedExecutor:
    """A Ray executor that remembers the tasks of one case, to count and to cancel them."""

    name = "ray"

    def __init__(self, inner: RayExecutor):
        self._inner = inner
        self._results: list[RayResults] = []
        self._tasks = 0
        self._cancelled = False
        self._lock = threading.Lock()

    @property
    def policy(self):
        return self._inner.policy

    @property
    def workers(self) -> int:
        return self._inner.workers

    @property
    def tasks(self) -> int:
        """Tasks submitted so far."""
        return self._tasks

    def submit(self, subject: Subject, units: Sequence[Unit]) -> RayResults:
        with self._lock:
            if self._cancelled:
                raise CaseCancelled("the case ran out of time")
            results = self._inner.submit(subject, units)
            self._results.append(results)
            self._tasks += results.tasks
            return results

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            running = list(self._results)
        for results in running:
            results.cancel()


@dataclass
class _Running:
    case: CaseInfo
    started: float
    executor: TrackedExecutor
    timed_out: bool = False


class Splitter:
    """Runs split cases in one driver thread; :meth:`poll` (from the dispatching thread) enforces
    the timeout and hands back finished records."""

    def __init__(self, suite: Suite, budget: Budget, executor: RayExecutor, timeout: float | None):
        self.suite, self.budget, self.executor, self.timeout = suite, budget, executor, timeout
        self._waiting: collections.deque[CaseInfo] = collections.deque()
        self._finished: queue.Queue[CaseRecord] = queue.Queue()
        self._running: _Running | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()

    def add(self, case: CaseInfo) -> None:
        with self._lock:
            self._waiting.append(case)

    def start(self) -> None:
        """Start running the split cases (call once enumeration is over)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="distcheck-split", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Run no further split case (the one running, if any, finishes in the background)."""
        self._stopped.set()
        with self._lock:
            running = self._running
        if running is not None:
            running.executor.cancel()

    @property
    def idle(self) -> bool:
        """No split case waiting, and none running that has not been reported."""
        with self._lock:
            return not self._waiting and (self._running is None or self._running.timed_out) and self._finished.empty()

    def _next(self) -> _Running | None:
        with self._lock:
            if not self._waiting:
                return None
            case = self._waiting.popleft()
            self._running = _Running(case, time.monotonic(), TrackedExecutor(self.executor))
            return self._running

    def _work(self) -> None:
        while not self._stopped.is_set():
            running = self._next()
            if running is None:
                time.sleep(0.05)
                continue
            case = running.case
            try:
                checker = distcheck_checker(running.executor)
                outcome = run_case(self.suite, case.id, case.fingerprint, self.budget, checker)
                record = to_record(case, outcome, running.executor.tasks)
            except BaseException as e:  # never leave the run waiting for this thread
                record = CaseRecord(case.id, ERROR, f"the split case stopped: {type(e).__name__}: {e}")
            with self._lock:
                if not running.timed_out:
                    self._finished.put(record)
                self._running = None

    def poll(self, now: float) -> list[CaseRecord]:
        """Records of the split cases finished (or stopped) since the last call."""
        with self._lock:
            running = self._running
        if running is not None and not running.timed_out and self.timeout is not None:
            if now - running.started > self.timeout:
                running.timed_out = True
                running.executor.cancel()
                record = timeout_record(running.case, self.timeout, now - running.started, running.executor.tasks)
                self._finished.put(record)
        if running is not None and running.timed_out and self.timeout is not None:
            if now - running.started > 2 * self.timeout:  # stuck in driver-side work: give up on the rest
                with self._lock:
                    stranded, self._waiting = list(self._waiting), collections.deque()
                for case in stranded:
                    message = f"not run: the driver is still busy with timed-out split case {running.case.id}"
                    self._finished.put(CaseRecord(case.id, ERROR, message))
        records = []
        while not self._finished.empty():
            records.append(self._finished.get())
        return records
