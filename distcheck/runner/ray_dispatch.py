"""Ray dispatch: the driver only schedules; cases are listed, built and checked on the workers.

- **Runners.** One long-lived *runner* task per CPU of the cluster takes its work from a queue
  that lives in an actor (:class:`~distcheck.runner.feed.WorkQueue`): the driver puts the
  suite's groups there (an op in a dtype, from metadata: the driver never generates a sample)
  and otherwise only reads what the runners report. A runner that takes a group lists it
  (generating and fingerprinting its samples), runs its share of the cases while the samples
  are at hand — the policy's choice (:mod:`.policy`; by default all of them, or the first
  batch of a large group) — and puts the rest back into the queue. Any runner can take a batch:
  it rebuilds the samples from the case ids and checks each fingerprint against the listed one.
  So the driver's work grows with the messages it reads, not with tasks or samples.
- **Streaming.** A runner is a Ray generator. It reports every ``REPORT_EVERY`` seconds of work
  (a quarter of the timeout if that is shorter): the items it started, the listings it made and
  the outcomes of the cases it finished since the last report; and at once when it runs out of
  work, starts work after being idle, or has found a case to split. So the driver reads a
  message per runner per second, not per item (each message costs the driver CPU, in Ray's
  threads and its own), and knows of every busy runner the item it last heard of, and
  since when; the queue knows what the runner took after that (see ``_Run.lost``).
- **Timeouts.** When a runner has reported nothing for ``timeout`` seconds in an item, one of
  the item's unreported cases — or of an item it took since — is stuck. If that can only be one
  case (a single case left and nothing taken since, or a *careful* task, which reports after
  every case), the runner is cancelled with ``force=True``
  (killing its worker: a plain cancel cannot interrupt a C call), the case is reported
  ``timeout`` and the rest of the item goes back to the queue. Otherwise the unreported cases
  run again in a careful task of their own (not through the queue): the quick ones pass again
  and the stuck one times out again, now by name (a hung case costs up to two
  timeouts, and no case is ever blamed for another). A worker that dies (out of memory, a crash
  in C) is handled alike: its case is reported ``error``, found by a careful rerun. A group
  whose listing times out or kills its worker is reported ``error`` per check kind. Then
  :mod:`~distcheck.runner.worker_errors` decides: a lost node is not the case's fault (its
  unreported cases run again, at most three node losses a case), a crash runs its case once more
  alone, out of memory is an ``error`` with Ray's figures. A new runner replaces a lost one.
- **Stop.** The loop ends, cancelling what runs, when the dispatcher's ``stop`` event is set.
- **Split cases.** A runner estimates each slow-mode case first: one above the split thresholds
  comes back as ``split``, and the driver hands it at once to a *coordinator* (:mod:`.split`:
  a long-lived actor, one case at a time; a slow-mode run starts one before its first
  dispatch): on the cluster, with its own RNG state, it runs the case's check, its Jacobians
  cut into chunks for every worker. Several split cases run at once. Their chunks go to the
  queue, which hands them out before anything else: runners run them between their items
  (:mod:`.chunks`), telling the driver at once when they start one, and yield each chunk's
  result, whose reference the driver forwards to the coordinator. No runner stops for a split
  case. A runner lost in a chunk has the chunk run again (up to ``CHUNK_TRIES`` times); a
  timed-out split case's coordinator is killed, its chunks dropped from the queue, and the
  runners that run one of them are stopped.
- **Hash seed.** Workers run with the run's ``PYTHONHASHSEED`` (see :mod:`~distcheck.runner.hash_seed`).
- **GPUs.** For a suite on ``cuda``, every runner and careful task asks Ray for
  ``gpus_per_runner`` GPUs, as do the chunk tasks of a split case (its coordinator asks for
  none: it mostly waits), and there are as many runners as the cluster's GPUs hold (see
  :mod:`.gpus`).
"""

from __future__ import annotations

import collections
import dataclasses
import gc
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import ray
from ray.exceptions import RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from distcheck.executors.ray_executor import WARM_TIMEOUT, cluster_cpus, cluster_gpus, ensure_ray
from distcheck.runner import hash_seed
from distcheck.runner.batches import CaseList
from distcheck.runner.budget import Budget
from distcheck.runner.case_runner import Outcome, SplitRequest, run_case, timeout_record, to_record
from distcheck.runner.chunks import Chunk, run_chunk
from distcheck.runner.default_policy import DefaultPolicy
from distcheck.runner.durations import Durations
from distcheck.runner.feed import SOON, WAIT, Enumeration, WorkQueue
from distcheck.runner.gpus import placement, ray_runners
from distcheck.runner.policy import Item, PolicyContext, WorkPolicy
from distcheck.runner.records import ERROR, CaseRecord, RecordBatch
from distcheck.runner.split import coordinators
from distcheck.runner.worker_errors import NODE_LOST, DeathPolicy, WorkerDeath, classify
from distcheck.suites.base import RUN, CaseId, CaseInfo, GroupInfo, Selection, Suite

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from distcheck.runner.protocols import Sink

POLL = 0.25  # seconds between looks at the runners: everything that arrived meanwhile is handled at once
PROMPT_UP_TO = 8  # runners and coordinators whose every message is handled as it arrives (see _Run.receive)
MESSAGES_AT_ONCE = 64  # of one runner's, read in a row (the others' wait that long)
REPORT_EVERY = 1.0  # seconds of outcomes a runner gathers before it reports them (the run folder is flushed as often)
COORDINATORS_LOST = 2  # a split case goes to another coordinator when one dies before beginning it
SPLITS_AT_ONCE = 2  # coordinators running at once, at least (a cluster of P workers: P / 8)
_ENDED = object()  # a generator's task has ended (see _Run.message)
IDLE_WAIT = (0.02, 0.5)  # a runner that finds no work asks again after this long, doubling
SPLIT_WAIT = 0.1  # at most this long while split cases run (their chunks wait for a runner that asks)
READY_GAP = 2.0  # seconds without a runner beginning after which the first dispatch waits no more


def split_share(workers: int, most: int, running: int, waiting: int) -> int:
    """The workers a split case's Jacobians are cut for as it starts, with ``running`` other
    split cases running and ``waiting`` more to start (at most ``most`` run at once): its share
    of the cluster while they run. A lone split case is cut for every worker; one among eight,
    for an eighth of them, in more rounds of shrinking chunks (``CostModel.rounds``): fewer,
    longer chunks first (each chunk costs the driver and the queue messages), its last ones as
    short as a lone split case's (they may run while other workers have nothing left)."""
    return max(1, workers // max(1, min(most, running + 1 + waiting)))


_prepared: set[str] = set()


def _prepare(suite: Suite) -> None:
    """Load what the suite needs in this worker, once; then keep it out of the garbage
    collector's sight (an op database is hundreds of thousands of objects, which every full
    collection the cases' allocations trigger would go over)."""
    if suite.name not in _prepared:
        suite.prepare()
        gc.freeze()
        _prepared.add(suite.name)


@ray.remote(num_cpus=1, max_retries=0, num_returns="streaming")
def _runner(runner: int, work, suite: Suite, budget: Budget, report_every: float, selection: Selection):
    """Takes items from ``work`` (the queue actor) until there are none; yields lists of events:
    ``("ready",)`` first, once it has loaded the suite; then ``("start", item)``,
    ``("listed", item id, listing, share)`` (the listing a
    :class:`~distcheck.runner.batches.CaseList`; or ``("unlisted", item id, message)``),
    ``("done", item id, upto, batch, [(k, outcome), ...])`` for the item's cases before the
    ``upto``-th not reported yet: their records as a
    :class:`~distcheck.runner.records.RecordBatch`, and the outcomes the driver acts on (see
    :class:`_Finished`), ``("idle",)``. A list goes out every ``report_every`` seconds of work,
    when the runner runs out of work, and when it starts work after being idle (so the driver
    knows it is busy); otherwise starts and listings wait for the next report, so that the
    driver's messages grow with time, not with items (see ``_Run.lost`` for what it then knows).
    A split case's chunk (:class:`~distcheck.runner.chunks.Chunk`) goes otherwise: the runner
    reports ``("chunk", key)`` at once when it comes from an item (not from another chunk), runs
    it, then yields ``[("result", key)]`` followed by the result itself, which the driver
    forwards without fetching it."""
    _prepare(suite)
    yield [("ready",)]
    events: list[tuple] = []
    reported, finished, pause, idle = time.monotonic(), None, IDLE_WAIT[0], True
    chunks = False  # its last work was a chunk

    def report(*last: tuple) -> list[tuple]:
        nonlocal events, reported
        sent, events, reported = [*events, *last], [], time.monotonic()
        return sent

    while True:
        item = ray.get(work.take.remote(runner, finished))
        if item is None:
            break
        if type(item) is Chunk:
            if events or not chunks:  # from an item: the driver learns it is in chunks now
                yield report(("chunk", item.key))
            result = run_chunk(item)
            yield [("result", item.key)]  # (which tells the driver the runner is alive)
            yield result
            finished, idle, chunks = None, True, True  # its next start goes out at once
            continue
        chunks = False
        if item in (WAIT, SOON):
            if events or finished is not None:
                yield report(("idle",))
                finished, idle = None, True
            time.sleep(min(pause, SPLIT_WAIT) if item == SOON else pause)
            pause = min(2 * pause, IDLE_WAIT[1])
            continue
        pause = IDLE_WAIT[0]
        events.append(("start", item))
        if idle or time.monotonic() - reported >= report_every:
            yield report()
            idle = False
        cases = item.cases
        if item.group is not None:
            try:
                listing = suite.list_group(item.group, selection)
            except Exception as e:
                events.append(("unlisted", item.id, f"listing the group failed: {type(e).__name__}: {e}"))
                finished = item.id
                continue
            share, rest = item.divide(listing)
            if rest:
                work.put.remote(rest)  # before this runner's next take (actor calls keep their order)
            events.append(("listed", item.id, CaseList(listing), share))
            cases = [listing[k] for k in share]
        done = _Finished(item.id)
        for k, case in enumerate(cases):
            outcome = run_case(suite, case.id, case.fingerprint, budget)
            done.add(k, case, outcome)
            # a case to split goes out at once: its coordinator starts on the driver's word, and
            # this runner's next item may take long
            if time.monotonic() - reported >= report_every or _to_split(outcome):
                yield report(done.event())
                done = _Finished(item.id)
        if done:
            events.append(done.event())
        finished = item.id
    if events:
        yield events


def _to_split(outcome: Outcome | SplitRequest) -> bool:
    return type(outcome) is SplitRequest


class _Finished:
    """The cases of an item that a runner finished since its last report: their records, made
    on the worker, go as one :class:`RecordBatch`; the outcomes the driver acts on (a case to
    split, Jacobian blocks to store in the run folder) go apart, with their index in the item,
    and become records there."""

    def __init__(self, item_id: int):
        self.item_id, self.upto = item_id, None
        self.records: list[CaseRecord] = []
        self.outcomes: list[tuple[int, Outcome | SplitRequest]] = []

    def add(self, k: int, case: CaseInfo, outcome: Outcome | SplitRequest) -> None:
        if type(outcome) is SplitRequest or outcome.blocks is not None:
            self.outcomes.append((k, outcome))
        else:
            self.records.append(to_record(case, outcome, 1))
        self.upto = k + 1

    def __bool__(self) -> bool:
        return self.upto is not None

    def event(self) -> tuple:
        return ("done", self.item_id, self.upto, RecordBatch(self.records), self.outcomes)


@ray.remote(num_cpus=1, max_retries=0, num_returns="streaming", _generator_backpressure_num_objects=1)
def _careful(item: Item, suite: Suite, budget: Budget, selection: Selection):
    """Runs a careful item, with the runner's events: a group (listed again; all its runnable
    cases run here) or cases, reporting after each case. Each report is received by the driver
    before the work goes on (backpressure of one report): a case that kills its worker right
    away cannot take the previous report down with it."""
    _prepare(suite)
    yield [("start", item)]
    cases = item.cases
    if item.group is not None:
        try:
            listing = suite.list_group(item.group, selection)
        except Exception as e:
            yield [("unlisted", item.id, f"listing the group failed: {type(e).__name__}: {e}")]
            return
        share = [k for k, case in enumerate(listing) if case.status == RUN]  # all, whatever the item's share
        yield [("listed", item.id, CaseList(listing), share)]
        cases = [listing[k] for k in share]
    for k, case in enumerate(cases):
        done = _Finished(item.id)
        done.add(k, case, run_case(suite, case.id, case.fingerprint, budget))
        yield [done.event()]


@dataclass
class _Runner:
    id: int
    item: Item | None = None  # the item it works on (None: idle, or not started yet)
    cases: CaseList | None = None  # the cases of the item (a group's share, once listed)
    current: int = 0  # the first case of the item not reported yet
    since: float = 0.0  # when the runner last reported (driver clock)
    careful: bool = False  # a careful task (one item), not a runner of the queue
    started: int | None = None  # the last item the driver heard it start
    chunk: tuple[int, int] | None = None  # the split case's chunk it runs (its key)
    ready: bool = False  # it has begun (loaded the suite, about to take its first item)

    @property
    def culprit_known(self) -> bool:
        """Whether a stuck (or deadly) runner can only be stuck in case ``current``."""
        return self.item is not None and (self.careful or self.current == len(self.cases or ()) - 1)


@dataclass
class _Split:
    """A split case: since when its coordinator runs it (None: not begun), and how many
    coordinators were lost before it began (not the case's doing: it goes to another one)."""

    case: CaseInfo
    since: float | None = None
    lost: int = 0
    id: int = 0  # its id in the queue (its chunks' keys)


@dataclass(frozen=True)
class RayDispatchOptions:
    """How a Ray dispatch runs: the cases' ``budget`` and ``timeout`` (seconds, None: none), the
    cluster's ``address`` (see ``ensure_ray``), the order of the work (``policy``: made once
    per dispatch from a :class:`~distcheck.runner.policy.PolicyContext` with a previous run's
    ``durations`` and ``batch_size``, None: the policy's own), the budget of a split case's
    coordinator (``split_budget``; default: the memory budget alone, never split again), and the
    GPUs each runner asks for (``gpus_per_runner``; None: CPUs)."""

    budget: Budget
    timeout: float | None = None
    address: str | None = None
    policy: Callable[[PolicyContext], WorkPolicy] = DefaultPolicy
    batch_size: int | None = None
    durations: Durations | None = None
    split_budget: Budget | None = None
    gpus_per_runner: float | None = None


class RayDispatcher:
    name = "ray"

    def __init__(self, suite: Suite, selection: Selection, options: RayDispatchOptions):
        self.suite, self.selection = suite, selection
        self.budget, self.timeout, self.address = options.budget, options.timeout, options.address
        self.policy, self.batch_size, self.durations = options.policy, options.batch_size, options.durations
        self.split_budget = options.split_budget or Budget(options.budget.max_bytes)
        self.first_dispatch: float | None = None  # perf_counter() of the first work handed out
        self.stop = threading.Event()  # set: the run stops (cancelling what runs)
        self.worker_env: dict[str, str] = {}  # extra worker environment (a new one: new workers)
        self.gpus_per_runner = options.gpus_per_runner  # None: the suite runs on CPUs
        self.placement: str | None = None  # on GPUs: runners on how many GPUs
        self._workers: int | None = None

    @property
    def workers(self) -> int:
        """Runners: one per CPU of the cluster; on GPUs, as many as the GPUs hold (UsageError
        for a cluster without them)."""
        if self._workers is None:
            ensure_ray(self.address, {"env_vars": dict(hash_seed.ENV)})
            if self.gpus_per_runner is None:
                self._workers = cluster_cpus()
            else:
                device, gpus = getattr(self.suite, "device", "cuda"), cluster_gpus()
                self._workers = ray_runners(device, cluster_cpus(), gpus, self.gpus_per_runner)
                self.placement = placement(self._workers, gpus, self.gpus_per_runner)
        return self._workers

    def task_options(self) -> dict:
        """Ray options of a runner or careful task: its GPU share, if the suite is on GPUs."""
        return {} if self.gpus_per_runner is None else {"num_gpus": self.gpus_per_runner}

    def run(self, items: Iterator[GroupInfo | CaseInfo], sink: Sink) -> None:
        _Run(self, items, sink).loop()

    def rerunning(self, attempt: int) -> None:
        self.worker_env = {"DISTCHECK_RERUN": str(attempt)}  # a new environment: new worker processes


class _Run:
    """One dispatch: feed the queue, read the runners, enforce timeouts, replace lost runners."""

    def __init__(self, dispatcher: RayDispatcher, items: Iterator[GroupInfo | CaseInfo], sink: Sink):
        self.d, self.sink = dispatcher, sink
        timeout = dispatcher.timeout
        self.report_every = min(REPORT_EVERY, timeout / 4) if timeout else REPORT_EVERY
        context = PolicyContext(dispatcher.suite.mode, dispatcher.workers, dispatcher.durations, dispatcher.batch_size)
        policy = dispatcher.policy(context)
        self.enumeration = Enumeration(items, policy.group_weight)
        env = hash_seed.task_runtime_env(ray.get_runtime_context().runtime_env)
        if dispatcher.worker_env:
            env = {"env_vars": {**hash_seed.ENV, **dispatcher.worker_env}}
        self.env = env
        self.deaths = DeathPolicy()
        # The queue lives on the driver's node: it must not go down with another node.
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        queue = ray.remote(num_cpus=0)(WorkQueue).options(runtime_env=env, scheduling_strategy=here)
        self.queue = queue.remote(policy)
        self.runner_task = _runner.options(runtime_env=env, **dispatcher.task_options())
        self.coordinators = coordinators(env)
        self.runners: dict[ray.ObjectRefGenerator, _Runner] = {}
        self.splits: dict[ray.ObjectRefGenerator, _Split] = {}
        self.waiting: collections.deque[_Split] = collections.deque()  # split cases not started yet
        self.split_ids: dict[int, ray.ObjectRefGenerator] = {}  # the running split cases by id
        self.results: list[tuple[int, tuple[int, int], ray.ObjectRef]] = []  # chunks' results to forward
        self.max_splits = max(SPLITS_AT_ONCE, dispatcher.workers // 8)
        self.next_runner = self.next_split = 0
        self.losses = 0  # runners lost since the last message of any runner

    def loop(self) -> None:
        try:
            # The runners first: Ray starts them (a worker lease each: seconds for many, on busy
            # cores) while a coordinator warms and before the first item is handed out.
            self.top_up()
            if getattr(self.d.suite, "mode", None) == "slow" and self.d.budget.split_seconds is not None:
                self.coordinators.warm(self.d.suite)  # before the first dispatch, not with the first split case
            self.await_runners()
            while not self.d.stop.is_set() and (
                self.runners or self.splits or self.waiting or not self.enumeration.over
            ):
                self.feed()
                self.receive()
                self.enforce_timeouts(time.monotonic())
                self.start_waiting()
        finally:
            for generator in self.runners:
                ray.cancel(generator, force=True)
            for generator in self.splits:
                self.coordinators.kill(generator)
            ray.kill(self.queue)

    def await_runners(self) -> None:
        """Wait for the runners to begin before the first item is handed out: Ray starts a
        runner (a worker lease, the task pushed to its process) several times faster on idle
        cores than on cores already busy with the runners that began first (on a 2-core
        machine: 64 runners in about 2 s, against 15 s once work runs). It waits while runners
        keep beginning: at most :data:`READY_GAP` seconds without a new one (a cluster shared
        with other jobs may not start them all), and at most the warm-up's timeout."""
        start = last = time.monotonic()
        while not self.d.stop.is_set() and time.monotonic() - start < WARM_TIMEOUT:
            waiting = self.unready()
            if not waiting or time.monotonic() - last > READY_GAP:
                return
            self.receive()
            if self.unready() < waiting:
                last = time.monotonic()

    def unready(self) -> int:
        """Runners of the queue that have not begun yet."""
        return sum(not r.careful and not r.ready for r in self.runners.values())

    def on_ready(self, runner: _Runner) -> None:
        runner.ready = True

    def start_runner(self) -> None:
        d = self.d
        generator = self.runner_task.remote(
            self.next_runner, self.queue, d.suite, d.budget, self.report_every, d.selection
        )
        self.runners[generator] = _Runner(self.next_runner, since=time.monotonic())
        self.next_runner += 1

    def feed(self) -> None:
        """Hand the queue what enumeration produced (and close it once enumeration is over)."""
        if self.enumeration.over:
            return
        work = self.enumeration.take(wait=0.0 if self.runners else 0.05)
        if work:
            self.queue.put.remote(work)
        if self.enumeration.over:
            self.queue.close.remote()

    def receive(self) -> None:
        pending = [*self.runners, *self.splits]
        if not pending:
            time.sleep(0.05)
            return
        # Many runners: what arrived within POLL is handled in one round, so that the rounds stay
        # few however many messages come. A few: each message as it arrives (their messages are
        # few: a report a second each, two a chunk), so that a split case's verdict, or the
        # run's end, is not held up to POLL.
        wanted = 1 if len(pending) <= PROMPT_UP_TO else len(pending)
        ready, _ = ray.wait(pending, num_returns=wanted, timeout=POLL)
        received = bool(ready)
        for _ in range(MESSAGES_AT_ONCE):  # and what the runners sent meanwhile (a chunk: two)
            for generator in ready:
                if generator in self.splits:
                    self.receive_split(generator)
                elif generator in self.runners:
                    self.receive_runner(generator)
            self.flush_results()
            ready = [g for g in ready if g in self.runners]
            if not ready:
                break
            ready, _ = ray.wait(ready, num_returns=len(ready), timeout=0)
        if received:
            # What the messages made (records, kept to the run's end; run_suite unfreezes them)
            # leaves the collector's sight: it would go over every record so far, again and
            # again, at a cost growing with the run.
            gc.freeze()

    @staticmethod
    def message(generator: ray.ObjectRefGenerator, table: dict) -> tuple[object, RayError | None]:
        """The generator's next message, or :data:`_ENDED` (its task ended: it leaves ``table``)
        with the error that ended it, if one did."""
        try:
            return ray.get(next(generator)), None
        except StopIteration:
            del table[generator]
            return _ENDED, None
        except RayError as e:
            del table[generator]
            return _ENDED, e

    def receive_runner(self, generator: ray.ObjectRefGenerator) -> None:
        runner = self.runners[generator]
        events, error = self.message(generator, self.runners)
        if events is _ENDED:
            if error is not None:  # the worker died in one of the unreported cases (or listing)
                self.lost(runner, classify(error))
            elif not runner.careful and (self.splits or self.waiting):
                # it found no work before the queue heard of a split case (the case that runner
                # found to split, maybe): the split case's chunks need every runner
                self.top_up()
            return
        runner.since = time.monotonic()
        self.losses = 0
        for event in events:
            if event[0] == "result":
                self.forward(generator, runner, event[1])
            else:
                getattr(self, f"on_{event[0]}")(runner, *event[1:])

    def on_chunk(self, runner: _Runner, key: tuple[int, int]) -> None:
        runner.item, runner.chunk = None, key  # a chunk's time is its split case's (see enforce_timeouts)

    def forward(self, generator: ray.ObjectRefGenerator, runner: _Runner, key: tuple[int, int]) -> None:
        """The result of chunk ``key`` follows in ``generator``: its reference (not its value)
        goes to the split case's coordinator; the driver, its owner, keeps it alive."""
        runner.chunk = None
        try:
            ref = next(generator)  # yielded right after the event; an error arrives in it
        except StopIteration:
            return  # the task ended: the next wait on it tells how
        self.results.append((runner.id, key, ref))

    def flush_results(self) -> None:
        """Forward the chunks' results received in a round: one call per coordinator, and one
        to the queue (which keeps each chunk until its result is forwarded)."""
        if not self.results:
            return
        by_actor = collections.defaultdict(list)
        for _, key, ref in self.results:
            split = self.split_ids.get(key[0])
            actor = None if split is None else self.coordinators.actor(split)
            if actor is not None:
                by_actor[actor].append((key, [ref]))
        for actor, results in by_actor.items():
            actor.deliver.remote(results)
        self.queue.forwarded.remote([(runner, key) for runner, key, _ in self.results])
        self.results = []

    def on_start(self, runner: _Runner, item: Item) -> None:
        if self.d.first_dispatch is None:
            self.d.first_dispatch = time.perf_counter()
        runner.item, runner.current, runner.started = item, 0, item.id
        runner.cases = None if item.group is not None else item.cases

    def on_listed(self, runner: _Runner, item_id: int, listing: CaseList, share: list[int]) -> None:
        self.sink.listed(runner.item.group, listing)
        runner.cases = listing.take(share)

    def on_unlisted(self, runner: _Runner, item_id: int, message: str) -> None:
        self.group_failed(runner.item.group, message)
        runner.item = None

    def on_done(
        self,
        runner: _Runner,
        item_id: int,
        upto: int,
        batch: RecordBatch,
        outcomes: list[tuple[int, Outcome | SplitRequest]],
    ) -> None:
        """Records made on the worker come as a batch, which goes on as it is (no object per
        case); a case that crashed its worker before is settled apart."""
        records = []
        for index, outcome in outcomes:
            if type(outcome) is SplitRequest:
                self.start_split(runner.cases[index])
            else:
                records.append(self.deaths.settle(to_record(runner.cases[index], outcome, 1)))
        if batch and self.deaths.crashes:
            crashed = [j for j, key in enumerate(batch.keys) if key in self.deaths.crashes]
            if crashed:
                batch, again = batch.without(crashed)
                records += [self.deaths.settle(record) for record in again]
        runner.current = upto
        if batch:
            self.sink.emit(batch)
        if records:
            self.sink.emit(RecordBatch(records))

    def on_idle(self, runner: _Runner) -> None:
        runner.item = runner.chunk = None

    def group_failed(self, group: GroupInfo, message: str) -> None:
        cases = [CaseInfo(CaseId(group.suite, group.op, group.dtype, check), ERROR, message) for check in group.checks]
        self.sink.listed(group, cases)

    def lost(
        self, runner: _Runner, death: WorkerDeath | None, timed_out: float | None = None, in_chunk: bool = False
    ) -> None:
        """``runner`` stopped: its worker died (``death``) or it was silent for ``timed_out``
        seconds. The queue says which items it took after the last start the driver heard of:
        their events went down with it (a runner tells of a start with its next report), so they
        run again carefully, and so do the unreported cases of the item the driver knows of — a
        case is blamed only when the runner cannot have been anywhere else: in the one
        unreported case of that item, having taken nothing since. A lost node reruns the
        unreported cases; new runners keep one per CPU. A runner lost in a split case's chunk
        (``in_chunk``, or the queue says so) blames no case: the chunk runs again."""
        self.losses += 1
        if self.losses > 2 * self.d.workers + 8:  # every new runner dies at once: the cluster itself is broken
            raise RuntimeError(f"{self.losses} Ray workers in a row died before reporting anything; last: {death}")
        moved_on = []
        if not runner.careful:
            in_chunk = self.chunk_lost(runner, death) or in_chunk
            moved_on = ray.get(self.queue.lost.remote(runner.id, runner.started, []))
        item, cases = runner.item, runner.cases or []
        unreported = cases[runner.current :]
        rest: list[CaseInfo] = []
        if item is None:
            pass
        elif item.group is not None and runner.cases is None:
            if death is not None and death.kind == NODE_LOST:
                self.start_careful(Item(item.id, group=item.group, careful=True))
            elif runner.careful:  # listed alone, reporting at once: the listing it is
                what = f"timed out after {self.d.timeout:g} s (--timeout)" if death is None else death.message
                self.group_failed(item.group, f"listing the group {what}")
            else:  # in the listing, or in a case whose listing report went down with the worker
                self.start_careful(Item(item.id, group=item.group, careful=True))
        elif death is not None and death.kind == NODE_LOST and unreported:
            exhausted = self.deaths.node_lost([case.key for case in unreported], death)
            given_up = [case for case in unreported if case.key in exhausted]
            self.sink.emit(RecordBatch(CaseRecord(case.id, ERROR, exhausted[case.key], 0.0, 1) for case in given_up))
            rest = [case for case in unreported if case.key not in exhausted]
        elif unreported and runner.culprit_known and not moved_on and not in_chunk:
            case, rest = unreported[0], unreported[1:]
            if death is None:
                self.sink.emit(RecordBatch([timeout_record(case, self.d.timeout, timed_out, tasks=1)]))
            else:
                message = self.deaths.died(case.key, death)
                if message is None:  # a first crash: once more, alone
                    self.start_careful(Item(item.id, cases=(case,), careful=True))
                else:
                    self.sink.emit(RecordBatch([CaseRecord(case.id, ERROR, message, 0.0, 1)]))
        elif unreported:
            self.start_careful(Item(item.id, cases=tuple(unreported), careful=True))
        if rest:
            self.queue.resubmit.remote([(rest, False)])
        for taken in moved_on:  # its start report had not gone out, or went down with the worker: maybe the culprit
            self.start_careful(dataclasses.replace(taken, careful=True))
        self.top_up()

    def chunk_lost(self, runner: _Runner, death: WorkerDeath | None) -> bool:
        """Whether ``runner`` ran a split case's chunk. The queue runs again the chunks it took
        whose results were not forwarded; one run too many times is given up, and its
        coordinator gets the loss as its units' error."""
        ran, given_up = ray.get(self.queue.chunk_lost.remote(runner.id))
        for chunk in given_up:
            split = self.split_ids.get(chunk.split)
            actor = None if split is None else self.coordinators.actor(split)
            if actor is not None:
                what = "stopped" if death is None else death.message
                message = f"the chunk's runner was lost {chunk.tries + 1} times; last: {what}"
                actor.deliver.remote([(chunk.key, message)])
        return ran

    def top_up(self) -> None:
        """One runner per CPU."""
        for _ in range(self.d.workers - sum(not r.careful for r in self.runners.values())):
            self.start_runner()

    def start_careful(self, item: Item) -> None:
        careful = _careful.options(runtime_env=self.env, **self.d.task_options())
        generator = careful.remote(item, self.d.suite, self.d.budget, self.d.selection)
        self.runners[generator] = _Runner(self.next_runner, since=time.monotonic(), careful=True)
        self.next_runner += 1

    def start_split(self, case: CaseInfo) -> None:
        """Start a coordinator for ``case`` (or queue it: at most ``max_splits`` at once)."""
        self.waiting.append(_Split(case))
        self.start_waiting()

    def start_waiting(self) -> None:
        """Coordinators for waiting split cases, up to ``max_splits`` running: each cuts its
        Jacobians for its share of the workers (:func:`split_share`), so a few fill the
        cluster; more would only add processes (a coordinator rebuilds and plans its case on
        CPUs Ray does not count)."""
        while self.waiting and len(self.splits) < self.max_splits:
            split = self.waiting.popleft()
            split.id, self.next_split = self.next_split, self.next_split + 1
            self.queue.open_split.remote(split.id)
            case, d = split.case, self.d
            share = split_share(d.workers, self.max_splits, len(self.splits), len(self.waiting))
            generator = self.coordinators.start(
                d.suite, case.id, case.fingerprint, d.split_budget, self.queue, split.id, d.gpus_per_runner, share
            )
            self.splits[generator] = split
            self.split_ids[split.id] = generator
            self.top_up()  # runners whose end the driver has read (see receive_runner for the others)

    def end_split(self, split: _Split, stop_runners: bool = False) -> None:
        """``split`` ended: the queue drops its chunks; ``stop_runners``: and the runners that
        run one of them are stopped (a timed-out case: its chunk may be what hangs)."""
        self.split_ids.pop(split.id, None)
        running = self.queue.end_split.remote(split.id)
        if not stop_runners:
            return
        stop = set(ray.get(running))
        for generator, runner in list(self.runners.items()):
            if runner.id in stop:
                ray.cancel(generator, force=True)
                del self.runners[generator]
                self.lost(runner, None, in_chunk=True)

    def receive_split(self, generator: ray.ObjectRefGenerator) -> None:
        split = self.splits[generator]
        message, error = self.message(generator, self.splits)
        if message is _ENDED:
            self.coordinators.done(generator, failed=error is not None)
            self.end_split(split)
            if error is not None and split.since is None and split.lost < COORDINATORS_LOST:
                split.lost += 1  # a coordinator that died before it began the case (kept from an earlier run)
                self.waiting.appendleft(split)
            elif error is not None:
                stopped = CaseRecord(split.case.id, ERROR, f"the split case stopped: {error}", 0.0, 1)
                self.sink.emit(RecordBatch([stopped]))
            return
        if message is None:  # it has begun the case (its timeout runs from now)
            split.since = time.monotonic()
            return
        outcome, tasks = message
        self.sink.emit(RecordBatch([to_record(split.case, outcome, tasks)]))

    def enforce_timeouts(self, now: float) -> None:
        if self.d.timeout is None:
            return
        for generator, runner in list(self.runners.items()):
            if runner.item is not None and now - runner.since > self.d.timeout:
                ray.cancel(generator, force=True)
                del self.runners[generator]
                self.lost(runner, None, timed_out=now - runner.since)
        for generator, split in list(self.splits.items()):
            if split.since is not None and now - split.since > self.d.timeout:
                self.coordinators.kill(generator)
                del self.splits[generator]
                self.end_split(split, stop_runners=True)  # its chunks too
                self.sink.emit(RecordBatch([timeout_record(split.case, self.d.timeout, now - split.since, tasks=1)]))
