"""A discrete-event model of the Ray dispatcher (issue 12, ``briefs/dispatcher.md``):

- the driver is one serial server: every message it reads, every case record, every task it
  submits costs it CPU (calibrated), and what follows from a message happens when it is done;
- it enumerates the groups (longest first with durations, else in suite order) and keeps a
  window of ``window_per_worker × P`` group and batch tasks submitted;
- a **group task** lists its group (``listing_per_case`` per case) and runs its plain (not
  costly) cases: all if they fill at most ``group_share`` batches, else the first batch; its
  listing message makes the driver queue the rest: costly cases one per task (recorded ≥
  ``costly_seconds`` with durations, else in slow mode ``costly_columns`` input elements) ahead
  of everything, longest first, the other cases behind the groups not listed yet, handed out in
  batches of ``batch`` consecutive cases of a group (or, as a policy to try, closed at a time
  target: ``batch_seconds``, or guided by the work left, ``batch_guided``); a batch's worker
  rebuilds its cases' samples as the recorded run's workers did (that is in the recorded
  seconds already: listing is the only work a group task adds);
- Ray's queue is first come, first served over the P worker slots; a task costs
  ``task_overhead`` on its slot, a case ``case_overhead`` beyond its recorded time; tasks report
  every ``report_every`` seconds and at the end;
- a **split case** takes its estimate (``estimate_evaluations`` evaluations) on its slot, comes
  back ``split``; the driver submits a coordinator (off the slots) that plans
  (``planning_evaluations``), puts its chunks at the back of Ray's queue (about ``chunk_rounds``
  rounds over the workers, the first round twice as long as the second, each at least
  ``chunk_min``), assembles and compares its Jacobians at the end (``assembly_per_byte``), then
  sends the driver its record.

Wall time runs from the first dispatch (time 0: a joined, warm cluster) to the last record read.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from benchmarks.sim.calibration import Calibration
from benchmarks.sim.workload import Case, Workload

GROUP, BATCH, CHUNK = "group", "batch", "chunk"


@dataclass(frozen=True)
class Prediction:
    """A predicted run on ``workers`` slots. Slot-seconds: ``work`` (case work), ``overhead``
    (Ray per task, listings, split estimates), ``starved`` (a slot idle while the run still has
    work to come: waiting for the driver, a coordinator, a listing), ``tail`` (a slot idle after
    its last task); they add up to ``workers × wall``."""

    workers: int
    wall: float
    work: float
    longest: float
    driver_cpu: float
    overhead: float
    starved: float
    tail: float
    tasks: int

    @property
    def bound(self) -> float:
        """max(work / P, the longest case that cannot be split, driver CPU)."""
        return max(self.work / self.workers, self.longest, self.driver_cpu)

    @property
    def ratio(self) -> float:
        return self.wall / self.bound if self.bound > 0 else math.nan


@dataclass
class _Split:
    case: Case
    chunks: int = 0


@dataclass
class _Task:
    kind: str
    group: int
    cases: tuple[Case, ...] = ()
    seconds: float = 0.0  # a chunk's work
    split: _Split | None = None


@dataclass
class _State:
    queue: collections.deque = field(default_factory=collections.deque)  # Ray's: tasks waiting for a slot
    costly: list = field(default_factory=list)  # the driver's front queue: (-seconds, n, group, case)
    listed: collections.deque = field(default_factory=collections.deque)  # the back queue: (group, case)
    remaining: float = 0.0  # seconds of the cases not handed out yet
    in_window: int = 0
    driver_free: float = 0.0
    driver_cpu: float = 0.0
    work: float = 0.0
    overhead: float = 0.0
    tasks: int = 0
    end: float = 0.0


class Model:
    """One simulated run of ``workload`` on ``workers`` slots."""

    def __init__(self, workload: Workload, workers: int, calibration: Calibration, durations: bool = True):
        self.w, self.p, self.c, self.durations = workload, workers, calibration, durations
        self.batch = calibration.batch(workload.mode)
        self.s = _State()
        self._events: list = []
        self._seq = itertools.count()
        self.free = list(range(workers))
        self.ready_at = [calibration.worker_start] * workers
        self.last_end = [0.0] * workers
        self.shares: dict[int, tuple[Case, ...]] = {}  # what each listing worker runs of its group
        self.s.remaining = workload.total
        order = range(len(workload.groups))
        if durations:
            order = sorted(order, key=lambda g: -workload.groups[g].seconds)
        self.groups = collections.deque(order)

    # -- the event loop --------------------------------------------------------------------
    def at(self, time: float, action: Callable, *args) -> None:
        heapq.heappush(self._events, (time, next(self._seq), action, args))

    def run(self) -> Prediction:
        t = self.driver(0.0, self.c.driver_per_group * len(self.w.groups) + self.c.driver_per_case * self.w.decided)
        self.fill(t)
        while self._events:
            time, _, action, args = heapq.heappop(self._events)
            self.s.end = max(self.s.end, time)
            action(time, *args)
        if abs(self.s.work - self.w.total) > 1e-6 * max(1.0, self.w.total):
            raise RuntimeError(f"the model stalled: {self.s.work:.6g} of {self.w.total:.6g} s of work done")
        wall = max(self.s.end, self.s.driver_free)
        tail = sum(wall - end for end in self.last_end)
        starved = self.p * wall - self.s.work - self.s.overhead - tail
        return Prediction(
            self.p, wall, self.s.work, self.w.longest, self.s.driver_cpu, self.s.overhead, starved, tail, self.s.tasks
        )

    def driver(self, arrival: float, cost: float) -> float:
        """The driver does ``cost`` seconds of work on something that arrived at ``arrival``:
        when it is done."""
        self.s.driver_free = max(self.s.driver_free, arrival) + cost
        self.s.driver_cpu += cost
        return self.s.driver_free

    # -- the driver ------------------------------------------------------------------------
    def next_task(self) -> _Task | None:
        """As the dispatcher's feed: a costly case alone, else a group to list, else a batch."""
        if self.s.costly:
            _, _, group, case = heapq.heappop(self.s.costly)
            return self.handed(_Task(BATCH, group, (case,)))
        if self.groups:
            group = self.groups.popleft()
            self.shares[group] = self.share(self.w.groups[group].cases)
            return self.handed(_Task(GROUP, group, self.shares[group]))
        if self.s.listed:
            group, batch = self.s.listed[0][0], []
            while self.s.listed and self.s.listed[0][0] == group and not self.full(batch):
                batch.append(self.s.listed.popleft()[1])
            return self.handed(_Task(BATCH, group, tuple(batch)))
        return None

    def handed(self, task: _Task) -> _Task:
        self.s.remaining -= sum(c.seconds for c in task.cases)
        return task

    def fill(self, t: float) -> None:
        while self.s.in_window < self.c.window_per_worker * self.p:
            task = self.next_task()
            if task is None:
                return
            t = self.driver(t, self.c.driver_submit)
            self.s.in_window += 1
            self.at(t, self.enqueue, [task])

    def costly(self, case: Case) -> bool:
        """Goes alone: recorded at least ``costly_seconds`` (with durations), else (slow mode) a
        cost hint of at least ``costly_columns`` input elements."""
        if self.durations:
            return case.seconds >= self.c.costly_seconds
        return self.w.mode == "slow" and case.columns >= self.c.costly_columns

    def target(self) -> float | None:
        """Seconds at which a batch closes, by recorded durations: ``batch_seconds``, or with
        ``batch_guided`` k the work not handed out yet over k·P (guided self-scheduling: batches
        shrink as the run ends); None: by count alone (as issue 12's dispatcher)."""
        if not self.durations:
            return None
        if self.c.batch_guided > 0:
            return self.s.remaining / (self.c.batch_guided * self.p)
        return self.c.batch_seconds or None

    def full(self, batch: list[Case]) -> bool:
        """A batch is full at ``batch`` cases, or at :meth:`target` recorded seconds."""
        target = self.target()
        return len(batch) >= self.batch or (target is not None and sum(c.seconds for c in batch) >= target)

    def share(self, cases: tuple[Case, ...]) -> tuple[Case, ...]:
        """The cases the worker that lists a group runs: those not costly, all of them if they
        fill at most ``group_share`` batches (by count alone), else the first batch."""
        plain = [c for c in cases if not self.costly(c)]
        if len(plain) <= self.c.group_share * self.batch and self.target() is None:
            return tuple(plain)
        batch: list[Case] = []
        for case in plain:
            if self.full(batch):
                break
            batch.append(case)
        return tuple(batch)

    def listed(self, t: float, group: int) -> None:
        """The listing arrives: the group's costly cases go to the front, the rest of its plain
        cases to the back (batched when handed out)."""
        t = self.driver(t, self.c.driver_per_message)
        cases = self.w.groups[group].cases
        for case in cases:
            if self.costly(case):
                heapq.heappush(self.s.costly, (-case.seconds, next(self._seq), group, case))
        shared = len(self.shares.pop(group))
        self.s.listed.extend((group, c) for c in [c for c in cases if not self.costly(c)][shared:])
        self.fill(t)

    def message(self, t: float, records: int, splits: tuple[Case, ...], final: bool) -> None:
        t = self.driver(t, self.c.driver_per_message + self.c.driver_per_case * records)
        for case in splits:
            t = self.driver(t, self.c.driver_submit)
            self.at(t + self.c.coordinator_start, self.coordinate, _Split(case))
        if final:
            self.s.in_window -= 1
            self.fill(t)

    # -- Ray and the workers ---------------------------------------------------------------
    def enqueue(self, t: float, tasks: list[_Task]) -> None:
        self.s.queue.extend(tasks)
        self.s.tasks += len(tasks)
        self.dispatch(t)

    def dispatch(self, t: float) -> None:
        while self.free and self.s.queue:
            slot = self.free.pop()
            self.start(slot, self.s.queue.popleft(), max(t, self.ready_at[slot]))

    def freed(self, t: float, slot: int) -> None:
        self.last_end[slot] = t
        self.free.append(slot)
        self.dispatch(t)

    def start(self, slot: int, task: _Task, t: float) -> None:
        t += self.c.task_overhead
        self.s.overhead += self.c.task_overhead
        if task.kind == CHUNK:
            t += task.seconds
            self.s.work += task.seconds
            self.at(t, self.freed, slot)
            self.at(t, self.chunk_done, task.split)
            return
        self.at(t, self.message, 0, (), False)  # "started"
        if task.kind == GROUP:
            listing = self.c.listing_per_case * len(self.w.groups[task.group].cases)
            t += listing
            self.s.overhead += listing
            self.at(t, self.listed, task.group)
        self.at(self.run_cases(task.cases, t), self.freed, slot)

    def run_cases(self, cases: tuple[Case, ...], t: float) -> float:
        """Runs ``cases`` from ``t``, reporting as a batch task does; when it ends."""
        reported, records, splits = t, 0, []
        if not cases:  # a group task whose cases all go alone: it ends after its listing
            self.at(t, self.message, 0, (), True)
        for k, case in enumerate(cases):
            if case.split:
                seconds = self.c.estimate_evaluations * case.evaluation
                self.s.overhead += seconds
                splits.append(case)
            else:
                seconds = case.seconds + self.c.case_overhead
                self.s.work += case.seconds
                self.s.overhead += self.c.case_overhead
                records += 1
            t += seconds
            last = k == len(cases) - 1
            if last or t - reported >= self.c.report_every:
                self.at(t, self.message, records, tuple(splits), last)
                reported, records, splits = t, 0, []
        return t

    # -- split cases -----------------------------------------------------------------------
    def chunk_sizes(self, work: float) -> list[float]:
        count = max(1, min(self.c.chunk_rounds * self.p, int(work / self.c.chunk_min)))
        first = min(count, self.p)
        if count == first:
            return [work / count] * count
        second = count - first  # the second round's chunks, half as long as the first's
        unit = work / (2 * first + second)
        return [2 * unit] * first + [unit] * second

    def coordinate(self, t: float, split: _Split) -> None:
        t += self.c.planning_evaluations * split.case.evaluation
        sizes = self.chunk_sizes(split.case.seconds)
        split.chunks = len(sizes)
        self.at(t, self.enqueue, [_Task(CHUNK, -1, seconds=s, split=split) for s in sizes])

    def chunk_done(self, t: float, split: _Split) -> None:
        split.chunks -= 1
        if split.chunks == 0:
            self.at(t + self.c.assembly_per_byte * split.case.bytes, self.message, 1, (), False)


def predict(workload: Workload, workers: int, calibration: Calibration, durations: bool = True) -> Prediction:
    """The model's run of ``workload`` on ``workers`` slots (``durations``: longest first)."""
    return Model(workload, workers, calibration, durations).run()
