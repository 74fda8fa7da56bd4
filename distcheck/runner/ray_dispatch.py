"""Ray dispatch: batches of cases as streaming generator tasks, results as they finish.

- **Batches.** Consecutive cases of one group (op and dtype: they share their samples, which
  a worker generates once) go into one task, up to ``batch_size`` of them (fast-mode cases take
  milliseconds: a task per case would cost more in Ray overhead than the check itself). Cases
  with a cost hint of at least ``costly`` go first, one per task (see :mod:`.feed`). A
  window of ``2 × workers`` tasks is kept in flight: every worker has its next task queued,
  while new work — a split case's chunks, a resubmitted batch — starts within one batch.
- **Streaming.** A batch task is a generator: it yields once when it starts, then the
  outcomes of the cases it has finished, gathered for ``REPORT_EVERY`` seconds (a quarter of
  the timeout if that is shorter; a message per case would cost the driver and the worker more
  CPU than a small case takes). The driver records each result as it arrives and knows since
  when the unreported cases have been running.
- **Timeouts.** When a batch has reported nothing for ``timeout`` seconds, one of its unreported
  cases is stuck. If that can only be one case (a single case left, or a *careful* batch, which
  reports after every case), its task is cancelled with ``force=True`` (killing the worker: a
  plain cancel cannot interrupt a C call), the case is reported ``timeout`` and the rest of the
  batch is resubmitted. Otherwise the unreported cases are resubmitted as a careful batch: the
  quick ones pass again and the stuck one times out again, now by name (a hung case costs up
  to two timeouts, and no case is ever blamed for another). A worker that dies (out of memory,
  a crash in C) is handled alike: its case is found by a careful rerun, and then handled as
  :mod:`~distcheck.runner.worker_errors` says (a lost node reruns the unreported cases, a crash
  runs its case once more alone, out of memory is an ``error``).
- **Stop.** The loop ends, cancelling what runs, when the dispatcher's ``stop`` event is set.
- **Hash seed.** Workers run with the run's ``PYTHONHASHSEED`` (see :mod:`~distcheck.runner.hash_seed`).
- **Budgets.** The worker estimates each case before running it: over the memory budget it is
  ``skipped``; above the split thresholds it comes back as ``split`` and runs on the driver in
  Jacobian chunks over every worker (:mod:`distcheck.runner.split`).
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import ray
from ray.exceptions import RayError

from distcheck.executors.ray_executor import RayExecutor, cluster_cpus, ensure_ray
from distcheck.runner import hash_seed
from distcheck.runner.budget import Budget
from distcheck.runner.case_runner import SPLIT_VERDICT, Outcome, run_case, timeout_record, to_record
from distcheck.runner.feed import Feed
from distcheck.runner.records import ERROR, CaseRecord
from distcheck.runner.split import Splitter
from distcheck.runner.worker_errors import NODE_LOST, DeathPolicy, WorkerDeath, classify
from distcheck.suites.base import CaseId, CaseInfo, Suite

POLL = 0.05  # seconds between looks at the tasks when nothing arrives
REPORT_EVERY = 0.25  # seconds of outcomes a batch gathers before it reports them
COSTLY = 1000  # cases with at least this cost hint go first, one per task


@ray.remote(num_cpus=1, max_retries=0, num_returns="streaming")
def _run_batch(suite: Suite, cases: list[tuple[CaseId, str | None]], budget: Budget, report_every: float):
    """Yields ``[]`` when it starts, then lists of ``(k, outcome)`` of case k: after every
    case if ``report_every`` is 0, else every ``report_every`` seconds and at the end."""
    suite.prepare()
    yield []
    finished, reported = [], time.monotonic()
    for k, (case, fingerprint) in enumerate(cases):
        finished.append((k, run_case(suite, case, fingerprint, budget)))
        if k == len(cases) - 1 or time.monotonic() - reported >= report_every:
            yield finished
            finished, reported = [], time.monotonic()


@dataclass
class _Batch:
    cases: list[CaseInfo]
    careful: bool = False  # reports after every case: a timeout or a death blames the right case
    current: int = 0  # the first case not reported yet
    since: float | None = None  # when the batch last reported (driver clock); None while queued

    @property
    def culprit_known(self) -> bool:
        """Whether a stuck (or deadly) batch can only be stuck in case ``current``."""
        return self.careful or self.current == len(self.cases) - 1


class RayDispatcher:
    name = "ray"

    def __init__(
        self,
        suite: Suite,
        budget: Budget,
        timeout: float | None,
        address: str | None = None,
        batch_size: int = 32,
        costly: int | None = COSTLY,
        split_budget: Budget | None = None,
    ):
        self.suite, self.budget, self.timeout, self.address = suite, budget, timeout, address
        self.batch_size, self.costly = batch_size, costly
        self.split_budget = split_budget or Budget(budget.max_bytes)
        self._workers: int | None = None
        self.stop = threading.Event()  # set: the run stops (cancelling what runs)
        self.worker_env: dict[str, str] = {}  # extra worker environment (a new one: new workers)

    @property
    def workers(self) -> int:
        if self._workers is None:
            ensure_ray(self.address, {"env_vars": dict(hash_seed.ENV)})
            self._workers = cluster_cpus()
        return self._workers

    def run(self, cases: Iterator[CaseInfo], emit: Callable[[CaseRecord], None]) -> None:
        _Run(self, cases, emit).loop()


class _Run:
    """One dispatch: the loop that keeps the window full, reads results, enforces timeouts."""

    def __init__(self, dispatcher: RayDispatcher, cases: Iterator[CaseInfo], emit: Callable[[CaseRecord], None]):
        self.d, self.emit = dispatcher, emit
        self.window = 2 * dispatcher.workers
        self.report_every = min(REPORT_EVERY, dispatcher.timeout / 4) if dispatcher.timeout else REPORT_EVERY
        self.feed = Feed(cases, dispatcher.costly)
        self.resubmitted: collections.deque[_Batch] = collections.deque()
        self.running: dict[ray.ObjectRefGenerator, _Batch] = {}
        self.splitter = Splitter(
            dispatcher.suite, dispatcher.split_budget, RayExecutor(dispatcher.address), dispatcher.timeout
        )
        env = hash_seed.task_runtime_env(ray.get_runtime_context().runtime_env)
        if dispatcher.worker_env:
            env = {"env_vars": {**hash_seed.ENV, **dispatcher.worker_env}}
        self.task = _run_batch.options(runtime_env=env)
        self.deaths = DeathPolicy()

    def loop(self) -> None:
        try:
            while not self.d.stop.is_set():
                self.fill()
                if self.feed.enumerated:  # the driver's RNG is free for split cases
                    self.splitter.start()
                if self.feed.done and not self.resubmitted and not self.running and self.splitter.idle:
                    return
                self.receive()
                now = time.monotonic()
                self.enforce_timeouts(now)
                for record in self.splitter.poll(now):
                    self.emit(record)
        finally:
            for generator in self.running:
                ray.cancel(generator, force=True)
            self.splitter.stop()

    def fill(self) -> None:
        while len(self.running) < self.window:
            if self.resubmitted:
                batch = self.resubmitted.popleft()
            else:
                cases = self.feed.batch(self.d.batch_size, wait=0.0 if self.running else POLL)
                if not cases:
                    return
                batch = _Batch(cases)
            payload = [(case.id, case.fingerprint) for case in batch.cases]
            report_every = 0.0 if batch.careful else self.report_every
            self.running[self.task.remote(self.d.suite, payload, self.d.budget, report_every)] = batch

    def receive(self) -> None:
        if not self.running:  # only split cases (or enumeration) in progress
            time.sleep(POLL)
            return
        ready, _ = ray.wait(list(self.running), num_returns=1, timeout=POLL)
        if ready:
            ready, _ = ray.wait(list(self.running), num_returns=len(self.running), timeout=0)
        for generator in ready:
            batch = self.running[generator]
            try:
                finished = ray.get(next(generator))
            except StopIteration:
                del self.running[generator]
                continue
            except RayError as e:  # the worker died in one of the unreported cases
                del self.running[generator]
                self.died(batch, classify(e))
                continue
            self.handle(batch, finished)

    def handle(self, batch: _Batch, finished: list[tuple[int, Outcome]]) -> None:
        for index, outcome in finished:
            case = batch.cases[index]
            if outcome.verdict == SPLIT_VERDICT:
                self.splitter.add(case)
            else:
                self.emit(self.deaths.settle(to_record(case, outcome, tasks=1)))
            batch.current = index + 1
        batch.since = time.monotonic() if batch.current < len(batch.cases) else None

    def stopped(self, batch: _Batch, record: CaseRecord | None) -> None:
        """``batch`` stopped in an unreported case: ``record`` says what happened to case
        ``current`` if it must have been that one (None: it runs again, alone); else its
        unreported cases go again, carefully."""
        if batch.culprit_known:
            if record is None:
                self.resubmitted.appendleft(_Batch([batch.cases[batch.current]], careful=True))
            else:
                self.emit(record)
            rest = batch.cases[batch.current + 1 :]
            if rest:
                self.resubmitted.appendleft(_Batch(rest))
        else:
            self.resubmitted.appendleft(_Batch(batch.cases[batch.current :], careful=True))

    def died(self, batch: _Batch, death: WorkerDeath) -> None:
        """``batch``'s task died: a lost node reruns its unreported cases (see :mod:`.worker_errors`);
        other deaths are handled as a stop in the case, once it is known."""
        if death.kind != NODE_LOST:
            case = batch.cases[batch.current]
            message = self.deaths.died(case.key, death) if batch.culprit_known else ""
            self.stopped(batch, None if message is None else CaseRecord(case.id, ERROR, message, 0.0, 1))
            return
        rest = batch.cases[batch.current :]
        exhausted = self.deaths.node_lost([case.key for case in rest], death)
        for case in rest:
            if case.key in exhausted:
                self.emit(CaseRecord(case.id, ERROR, exhausted[case.key], 0.0, 1))
        rest = [case for case in rest if case.key not in exhausted]
        if rest:
            self.resubmitted.appendleft(_Batch(rest, batch.careful))

    def enforce_timeouts(self, now: float) -> None:
        if self.d.timeout is None:
            return
        for generator, batch in list(self.running.items()):
            if batch.since is not None and now - batch.since > self.d.timeout:
                ray.cancel(generator, force=True)
                del self.running[generator]
                case = batch.cases[batch.current]
                self.stopped(batch, timeout_record(case, self.d.timeout, now - batch.since, tasks=1))
