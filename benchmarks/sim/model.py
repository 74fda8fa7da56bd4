"""A discrete-event model of the Ray dispatcher (``distcheck/runner/ray_dispatch.py``): one
runner per worker slot, taking its work from a queue, the driver off the per-task path.

- **The queue** (an actor, not the driver) hands a runner its next item the moment it asks,
  in the order of the run's policy: the **real policy objects** (``distcheck/runner/policy.py``;
  by default ``default_policy.py``: costly cases first and alone, then groups to list, then
  batches of listed cases), made as the dispatcher makes them — the model keeps no copy of their
  rules or constants. Taking an item costs its runner ``task_overhead``. A runner that finds no
  work asks again after ``idle_poll`` seconds, doubling up to ``idle_poll_max``.
- **A runner** that takes a group lists it (``listing_per_group``, and ``listing_per_case`` a
  case), puts the cases beyond its share (the item's, as on a worker) back into the queue at
  once, and runs its share; a case costs ``case_overhead`` beyond its recorded time.
- **Reports.** A runner reports every ``report_every`` seconds of work, at once when it has found
  a case to split, and when it runs out of work; a report costs the driver ``driver_per_message``
  and ``driver_per_case`` per record in it. The driver is one serial server, fed besides by the
  enumeration (``driver_per_group`` a group, ``driver_per_case`` a case decided without running);
  what waits for it is a split case's coordinator and the end of the run (its last record read).
- **Split cases.** A runner estimates a split case (``estimate_evaluations`` evaluations) and
  reports it at once; the driver starts its coordinator (``driver_submit``, then
  ``coordinator_start``; at most max(2, P / 8) at once, as the dispatcher), which plans
  (``planning_evaluations``) and puts its chunks in the queue: the real cost model's cut for
  the case's share of the workers (the dispatcher's ``split_share``: every worker for a lone
  split case, an eighth among eight), ``chunk_rounds`` rounds of shrinking chunks over the
  whole cluster, more rounds over a share, each chunk at least ``chunk_min``.
  The queue hands chunks out before any other work: a runner that finishes its item, or that
  polls while idle (a runner with nothing to do waits while split cases run, asking at least
  every ``split_poll_max`` seconds), takes the next
  chunk; no runner stops. A chunk costs the driver two messages: the runner's news that it
  starts one, and its result, which the driver forwards to the coordinator (the chunk counts
  as done then). Jacobians within the block budget (``block_bytes``) are assembled and
  compared on the coordinator (``assembly_per_byte``); larger ones never meet in one process:
  their chunks are cut so that each unit holds at most half the budget while it runs (at least
  ``bytes / block_bytes`` column units and twice as many row units, which compute every row
  twice: ``3 · bytes / block_bytes`` units), and one block job per numerical column unit
  compares it with the rows it meets on a worker slot (``assembly_per_byte`` of its share of the
  bytes, overhead, not work), as ``executors/ray_blocks.py``. Then the coordinator's record goes
  to the driver.

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
from distcheck.kinds import CheckKind
from distcheck.plan.chunking import Workload as Items
from distcheck.plan.comparisons import whole_bytes
from distcheck.plan.cost_model import CostModel
from distcheck.runner.default_policy import DefaultPolicy
from distcheck.runner.options import RunConfig, RunOptions
from distcheck.runner.policy import WorkPolicy
from distcheck.runner.split.cases import SPLITS_AT_ONCE, split_share
from distcheck.storage.durations import Durations
from distcheck.suites.base import CaseId, CaseInfo, GroupInfo, Selection

GROUP, BATCH, CHUNK, BLOCK = "group", "batch", "chunk", "block"


@dataclass(frozen=True)
class _Suite:
    """What the run's configuration reads of its suite, for the policy the model drives."""

    mode: str
    name: str = "sim"
    engine: str = "torch"


SUITE, DTYPE, CHECK = "sim", "float64", CheckKind.GRAD  # the cases the policy sees


@dataclass(frozen=True)
class Prediction:
    """A predicted run on ``workers`` slots. Slot-seconds: ``work`` (case work), ``overhead``
    (Ray per task, listings, split estimates), ``starved`` (a slot idle while the run still has
    work to come: waiting for a listing, a coordinator, a poll), ``tail`` (a slot idle after its
    last task); they add up to ``workers × wall``."""

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
    """A split case at its coordinator: ``chunks`` of its tasks not done yet (chunks, then
    block jobs), ``units`` its chunks, ``compared`` once its block jobs are handed out."""

    case: Case
    chunks: int = 0
    units: int = 0
    compared: bool = False
    share: int = 1  # the workers its Jacobians are cut for


@dataclass
class _Task:
    kind: str
    group: int
    cases: tuple[Case, ...] = ()
    seconds: float = 0.0  # a chunk's work
    split: _Split | None = None
    rest: list[CaseInfo] = field(default_factory=list)  # a group's cases its lister does not run


@dataclass
class _Slot:
    """A worker slot. Its runner's reports: records not reported yet, since when (its own
    clock). ``idle``: its runner found no work; then ``next_poll`` is when it asks again (None:
    as soon as there is work)."""

    reported: float = 0.0
    records: int = 0
    idle: bool = False
    pause: float = 0.0  # its runner's next wait when it finds no work
    next_poll: float | None = None
    last_end: float = 0.0


@dataclass
class _State:
    chunks: collections.deque = field(default_factory=collections.deque)  # split cases' chunks in the queue
    waiting: collections.deque = field(default_factory=collections.deque)  # split cases for a coordinator
    coordinators: int = 0  # submitted, not recorded yet
    splits_left: int = 0  # found, not yet recorded
    driver_free: float = 0.0
    driver_cpu: float = 0.0
    work: float = 0.0
    overhead: float = 0.0
    tasks: int = 0


class Model:
    """One simulated run of ``workload`` on ``workers`` slots, its work ordered by ``policy``
    (made as the dispatcher makes it, with the recorded seconds as ``--durations`` if
    ``durations``). The policy sees each case as a :class:`CaseInfo` of a suite ``sim`` whose
    groups are the workload's (op ``gN``), a case's cost hint its input elements."""

    def __init__(
        self,
        workload: Workload,
        workers: int,
        calibration: Calibration,
        durations: bool = True,
        policy: Callable[[RunConfig], WorkPolicy] = DefaultPolicy,
    ):
        self.w, self.p, self.c = workload, workers, calibration
        self.s = _State()
        self._events: list = []
        self._seq = itertools.count()
        self.slots = [_Slot(reported=calibration.worker_start) for _ in range(workers)]
        self.max_splits = max(SPLITS_AT_ONCE, workers // 8)
        groups = [GroupInfo(SUITE, f"g{g}", DTYPE, (CHECK,)) for g in range(len(workload.groups))]
        self.index = {info.key: g for g, info in enumerate(groups)}
        self.listings = [
            [CaseInfo(CaseId(SUITE, info.op, DTYPE, CHECK, k), cost=case.columns) for k, case in enumerate(group.cases)]
            for info, group in zip(groups, workload.groups, strict=True)
        ]
        self.case: dict[str, Case] = {}  # by the key of its CaseInfo
        self.group_of: dict[str, int] = {}
        for g, listing in enumerate(self.listings):
            for info, case in zip(listing, workload.groups[g].cases, strict=True):
                self.case[info.key], self.group_of[info.key] = case, g
        recorded = Durations({key: case.seconds for key, case in self.case.items()}) if durations else None
        config = RunConfig(RunOptions(durations=recorded), _Suite(workload.mode), Selection(), workers)
        self.policy = policy(config)
        if self.policy.group_weight is not None:  # as the dispatcher's enumeration: heaviest first
            groups = sorted(groups, key=self.policy.group_weight, reverse=True)
        self.policy.put(groups)

    # -- the event loop --------------------------------------------------------------------
    def at(self, time: float, action: Callable, *args) -> None:
        heapq.heappush(self._events, (time, next(self._seq), action, args))

    def run(self) -> Prediction:
        enumeration = self.c.driver_per_group * len(self.w.groups) + self.c.driver_per_case * self.w.decided
        self.driver(0.0, enumeration + self.c.driver_submit * self.p)  # the groups, the runners
        for slot in range(self.p):
            self.at(self.c.worker_start, self.ask, slot)
        while self._events:
            time, _, action, args = heapq.heappop(self._events)
            action(time, *args)
        if abs(self.s.work - self.w.total) > 1e-6 * max(1.0, self.w.total):
            raise RuntimeError(f"the model stalled: {self.s.work:.6g} of {self.w.total:.6g} s of work done")
        wall = max(self.s.driver_free, *(slot.last_end for slot in self.slots))  # the last record read
        tail = sum(wall - slot.last_end for slot in self.slots)
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

    # -- the queue: the real policy ------------------------------------------------------
    def next_item(self) -> _Task | None:
        """As ``WorkQueue.take`` once no chunk waits: the policy's next item. A group's share is
        what its lister runs, the rest goes back once listed."""
        item = self.policy.take()
        if item is None:
            return None
        self.s.tasks += 1
        if item.group is None:
            cases = tuple(self.case[key] for key in item.cases.keys)
            return _Task(BATCH, self.group_of[item.cases.keys[0]], cases)
        group = self.index[item.group.key]
        share, rest = item.divide(self.listings[group])
        cases = self.w.groups[group].cases
        return _Task(GROUP, group, tuple(cases[k] for k in share), rest=rest)

    def listed(self, t: float, task: _Task) -> None:
        """A runner has listed its group: the cases it does not run go back to the policy; idle
        runners find them."""
        self.policy.put(task.rest)
        self.wake(t)

    # -- the runners -----------------------------------------------------------------------
    def ask(self, t: float, slot: int) -> None:
        """A slot is free at ``t``. Its runner asks the queue for a chunk, else an item; with
        none, it reports what it holds and waits."""
        state = self.slots[slot]
        state.next_poll = None
        if self.s.chunks:
            state.idle = False
            self.run_chunk(t, slot, self.s.chunks.popleft())
            return
        task = self.next_item()
        if task is None:
            self.report(t, slot, ())
            if not state.idle:
                state.idle, state.pause = True, self.c.idle_poll
            if self.c.idle_poll > 0 and self.more_to_come():  # (0: it finds work the moment it comes)
                state.next_poll = t + self.wait(state)
                state.pause = min(2 * state.pause, self.c.idle_poll_max)
                self.at(state.next_poll, self.poll, slot, state.next_poll)
            return
        if state.idle:  # a runner that starts work after being idle reports at once
            state.idle = False
            self.report(t, slot, ())
        self.run_item(t, slot, task)

    def wait(self, slot: _Slot) -> float:
        """How long an idle runner waits before it asks again: at most ``split_poll_max`` while
        split cases run (the queue says so: their chunks may come any moment)."""
        return min(slot.pause, self.c.split_poll_max) if self.s.coordinators else slot.pause

    def poll(self, t: float, slot: int, when: float) -> None:
        state = self.slots[slot]
        if state.idle and state.next_poll == when:
            self.ask(t, slot)

    def more_to_come(self) -> bool:
        """Work may still come: work the policy holds, split cases, running items."""
        return bool(self.policy.pending() or self.s.splits_left or self.busy())

    def busy(self) -> bool:
        return any(not slot.idle for slot in self.slots)

    def wake(self, t: float) -> None:
        """Work arrived at ``t``: idle runners find it when they next ask (they poll with a
        growing pause)."""
        for k, slot in enumerate(self.slots):
            if not slot.idle:
                continue
            if slot.next_poll is None:
                self.at(t, self.ask, k)
                continue
            when = slot.next_poll
            while when < t:  # polls it made meanwhile, each finding nothing
                when += self.wait(slot)
                slot.pause = min(2 * slot.pause, self.c.idle_poll_max)
            if when != slot.next_poll:
                slot.next_poll = when
                self.at(when, self.poll, k, when)

    def run_item(self, t: float, slot: int, task: _Task) -> None:
        """The runner runs ``task`` from ``t`` (its whole timeline now: the events it makes
        happen in order), reporting as it goes."""
        t += self.c.task_overhead
        self.s.overhead += self.c.task_overhead
        if task.kind == GROUP:
            listing = self.c.listing_per_group + self.c.listing_per_case * len(self.w.groups[task.group].cases)
            t += listing
            self.s.overhead += listing
            self.at(t, self.listed, task)
        state = self.slots[slot]
        for case in task.cases:
            if case.split:
                seconds = self.c.estimate_evaluations * case.evaluation
                t += seconds
                self.s.overhead += seconds
                self.s.splits_left += 1
                self.report(t, slot, (case,))  # at once
                continue
            t += case.seconds + self.c.case_overhead
            self.s.work += case.seconds
            self.s.overhead += self.c.case_overhead
            state.records += 1
            if t - state.reported >= self.c.report_every:
                self.report(t, slot, ())
        state.last_end = t
        self.at(t, self.ask, slot)

    def report(self, t: float, slot: int, splits: tuple[Case, ...]) -> None:
        """The runner of ``slot`` sends a report at ``t`` (if it has something to say)."""
        state = self.slots[slot]
        if state.records or splits or not state.idle:
            self.at(t, self.message, state.records, splits)
        state.reported, state.records = t, 0

    def message(self, t: float, records: int, splits: tuple[Case, ...]) -> None:
        """The driver reads a report: its records, and a case to split."""
        t = self.driver(t, self.c.driver_per_message + self.c.driver_per_case * records)
        self.s.waiting.extend(_Split(case) for case in splits)
        self.start_coordinators(t)

    # -- split cases -----------------------------------------------------------------------
    def start_coordinators(self, t: float) -> None:
        while self.s.waiting and self.s.coordinators < self.max_splits:
            split = self.s.waiting.popleft()
            split.share = split_share(self.p, self.max_splits, self.s.coordinators, len(self.s.waiting))
            self.s.coordinators += 1
            start = self.driver(t, self.c.driver_submit) + self.c.coordinator_start
            self.at(start, self.coordinate, split)

    def blockwise(self, case: Case) -> bool:
        """Whether the case's Jacobians are compared by block jobs (compared whole, over the
        block budget)."""
        return whole_bytes(case.bytes) > self.c.block_bytes

    def chunk_sizes(self, case: Case, share: int) -> list[float]:
        """The chunks of the real cost model (``distcheck/plan/cost_model.py``) for the case's
        ``share`` of the workers (its work divisible at will), at least ``chunk_min`` seconds
        each; over the block budget at least ``3 · bytes / block_bytes`` equal ones."""
        work = case.seconds
        model = CostModel(
            workers=share, cluster=self.p, min_task=self.c.chunk_min, tasks_per_worker=self.c.chunk_rounds
        )
        items = 10**6  # the model cuts items; this many stand for divisible work
        sizes = [(stop - start) * work / items for start, stop in model.timed_chunks(Items(items, work / items))]
        if self.blockwise(case):
            units = math.ceil(3 * case.bytes / self.c.block_bytes)
            if units > len(sizes):
                return [work / units] * units
        return sizes

    def coordinate(self, t: float, split: _Split) -> None:
        t += self.c.planning_evaluations * split.case.evaluation
        sizes = self.chunk_sizes(split.case, split.share)
        split.chunks = split.units = len(sizes)
        self.at(t, self.enqueue_chunks, [_Task(CHUNK, -1, seconds=s, split=split) for s in sizes])

    def enqueue_chunks(self, t: float, chunks: list[_Task]) -> None:
        self.s.chunks.extend(chunks)
        self.s.tasks += len(chunks)
        self.wake(t)

    def run_chunk(self, t: float, slot: int, task: _Task) -> None:
        """The runner of ``slot`` runs a chunk from ``t``: its news that it starts one goes to
        the driver at once, its result when it ends (see :meth:`forwarded`)."""
        self.at(t, self.message, 0, ())
        t += self.c.task_overhead + task.seconds
        self.s.overhead += self.c.task_overhead
        if task.kind == BLOCK:  # comparison, not the case's recorded work
            self.s.overhead += task.seconds
        else:
            self.s.work += task.seconds
        self.slots[slot].last_end = t
        self.at(t, self.ask, slot)
        self.at(t, self.forwarded, task.split)

    def forwarded(self, t: float, split: _Split) -> None:
        """The driver forwards a chunk's result to its coordinator."""
        self.at(self.driver(t, self.c.driver_per_message), self.chunk_done, split)

    def chunk_done(self, t: float, split: _Split) -> None:
        split.chunks -= 1
        if split.chunks > 0:
            return
        comparing = self.c.assembly_per_byte * split.case.bytes
        if not self.blockwise(split.case):  # on the coordinator
            self.at(t + comparing, self.split_recorded, split)
        elif split.compared:  # the block jobs' summaries are in
            self.at(t, self.split_recorded, split)
        else:
            jobs = max(1, split.units // 3)  # one per numerical column unit
            split.compared, split.chunks = True, jobs
            self.enqueue_chunks(t, [_Task(BLOCK, -1, seconds=comparing / jobs, split=split) for _ in range(jobs)])

    def split_recorded(self, t: float, split: _Split) -> None:
        """The coordinator's record reaches the driver."""
        self.driver(t, self.c.driver_per_message + self.c.driver_per_case)
        self.s.coordinators -= 1
        self.s.splits_left -= 1
        self.start_coordinators(t)


def predict(
    workload: Workload,
    workers: int,
    calibration: Calibration,
    durations: bool = True,
    policy: Callable[[RunConfig], WorkPolicy] = DefaultPolicy,
) -> Prediction:
    """The model's run of ``workload`` on ``workers`` slots, ordered by ``policy`` (``durations``:
    with the recorded seconds, as ``--durations``)."""
    return Model(workload, workers, calibration, durations, policy).run()
