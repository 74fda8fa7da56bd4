"""Ray dispatch: the driver only schedules; cases are listed, built and checked on the workers.
It feeds the work queue (:mod:`.work_queue`), handles what the runners (:mod:`.worker`) and the
split cases' coordinators send (:mod:`.messages`) in a method per message, stops the runners
silent past the timeout and replaces lost ones (:mod:`.pool`), and runs split cases (:mod:`.split`)."""

from __future__ import annotations

import gc
import math
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import ray
from ray.exceptions import RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from distcheck import hash_seed
from distcheck.executors.ray_executor import WARM_TIMEOUT, cluster_cpus, cluster_gpus, ensure_ray
from distcheck.gpus import is_cuda, placement, ray_runners
from distcheck.records.case_record import RecordBatch
from distcheck.runner import messages
from distcheck.runner.deaths import classify
from distcheck.runner.options import RunConfig, RunOptions
from distcheck.runner.policy import load_policy
from distcheck.runner.pool import Runners, group_error
from distcheck.runner.protocols import Sink
from distcheck.runner.split.cases import SplitCases
from distcheck.runner.split.coordinator import coordinators
from distcheck.runner.work_queue import Enumeration, WorkQueue
from distcheck.suites.base import CaseInfo, GroupInfo, Suite

POLL = 0.25  # seconds between looks at the runners: everything that arrived meanwhile is handled at once
PROMPT_UP_TO = 8  # runners and coordinators whose every message is handled as it arrives (see Dispatch.receive)
PROMPT_POLL = 1.0  # seconds a wait for one of those few may last once the queue has all the work (see Dispatch.poll)
MESSAGES_AT_ONCE = 64  # of one runner's, read in a row (the others' wait that long)
READY_GAP = 2.0  # seconds without a runner beginning after which the first dispatch waits no more
_ENDED = object()  # a generator's task has ended


class RayDispatcher:
    """Runs a suite's cases on Ray (see the module's doc): on the cluster at ``options.address``,
    the policy ``options.policy`` ordering the work (a bad name raises here)."""

    name = "ray"

    def __init__(self, suite: Suite, options: RunOptions):
        self.suite, self.options = suite, options
        self.policy = load_policy(options.policy)
        self.first_dispatch: float | None = None  # perf_counter() of the first work handed out
        self.stop = threading.Event()  # set: the run stops (cancelling what runs)
        self.placement: str | None = None  # on GPUs: runners on how many GPUs
        self._workers: int | None = None

    @property
    def workers(self) -> int:
        """Runners: one per CPU of the cluster; on GPUs, as many as the GPUs hold (UsageError
        for a cluster without them)."""
        if self._workers is None:
            ensure_ray(self.options.address, {"env_vars": dict(hash_seed.ENV)})
            device = getattr(self.suite, "device", "cpu")
            if not is_cuda(device):
                self._workers = cluster_cpus()
            else:
                share, gpus = self.options.gpus_per_runner, cluster_gpus()
                self._workers = ray_runners(device, cluster_cpus(), gpus, share)
                self.placement = placement(self._workers, gpus, share)
        return self._workers

    def run(self, config: RunConfig, items: Iterator[GroupInfo | CaseInfo], sink: Sink) -> None:
        config = replace(config, workers=self.workers)
        policy = self.policy(config)
        env = hash_seed.task_runtime_env(ray.get_runtime_context().runtime_env)
        if config.attempt:  # a new environment: new worker processes
            env = {"env_vars": {**hash_seed.ENV, "DISTCHECK_RERUN": str(config.attempt)}}
        # The queue lives on the driver's node: it must not go down with another node.
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        queue = ray.remote(num_cpus=0)(WorkQueue).options(runtime_env=env, scheduling_strategy=here).remote(policy)
        config_ref = ray.put(config)
        runners = Runners(config, config_ref, queue, env, sink)
        splits = SplitCases(config, config_ref, queue, coordinators(env), sink)
        Dispatch(self, config, Enumeration(items, policy.group_weight), queue, runners, splits, sink).loop()


class Dispatch:
    """One dispatch: feed the ``queue`` from ``enumeration``, read what the ``runners`` and the
    coordinators of the ``splits`` send, enforce timeouts; records go to ``sink``."""

    def __init__(
        self,
        dispatcher: RayDispatcher,
        config: RunConfig,
        enumeration: Enumeration,
        queue,
        runners: Runners,
        splits: SplitCases,
        sink: Sink,
    ):
        self.dispatcher, self.config, self.enumeration, self.queue = dispatcher, config, enumeration, queue
        self.runners, self.splits, self.sink = runners, splits, sink
        self.handlers = {
            messages.Ready: self.on_ready,
            messages.Started: self.on_started,
            messages.Listed: self.on_listed,
            messages.Unlisted: self.on_unlisted,
            messages.Finished: self.on_finished,
            messages.Idle: self.on_idle,
            messages.ChunkStarted: self.on_chunk_started,
            messages.ChunkDone: self.on_chunk_done,
            messages.Begun: self.on_begun,
            messages.Decided: self.on_decided,
        }

    def loop(self) -> None:
        try:
            # the runners first: Ray starts them (seconds for many) while a coordinator warms
            self.runners.top_up()
            if self.config.splits:
                self.splits.pool.warm(self.config.suite)  # before the first dispatch, not with the first split case
            self.await_runners()
            stop = self.dispatcher.stop
            while not stop.is_set() and (self.runners.by_generator or self.splits.active or not self.enumeration.over):
                self.feed()
                self.receive()
                self.enforce_timeouts(time.monotonic())
                self.start_splits()
        finally:
            self.runners.stop_all()
            self.splits.stop()
            ray.kill(self.queue)

    def await_runners(self) -> None:
        """No item before the runners have begun (Ray starts a task faster on idle cores), while
        they keep beginning: at most :data:`READY_GAP` seconds without a new one (a shared cluster
        may not start them all), at most the warm-up's timeout."""
        start = last = time.monotonic()
        while not self.dispatcher.stop.is_set() and time.monotonic() - start < WARM_TIMEOUT:
            waiting = self.runners.unready()
            if not waiting or time.monotonic() - last > READY_GAP:
                return
            self.receive()
            if self.runners.unready() < waiting:
                last = time.monotonic()

    def feed(self) -> None:
        """Hand the queue what enumeration produced (and close it once enumeration is over)."""
        if self.enumeration.over:
            return
        work = self.enumeration.take(wait=0.0 if self.runners.by_generator else 0.05)
        if work:
            self.queue.put.remote(work)
        if self.enumeration.over:
            self.queue.close.remote()

    def receive(self) -> None:
        """Handle the messages that arrived: with many runners, what arrived within :data:`POLL` in
        one round; with a few, each as it arrives (a split verdict, or the end, is not held up)."""
        pending = [*self.runners.by_generator, *self.splits.running]
        if not pending:
            time.sleep(0.05)
            return
        prompt = len(pending) <= PROMPT_UP_TO
        ready, _ = ray.wait(pending, num_returns=1 if prompt else len(pending), timeout=self.poll(prompt))
        received = bool(ready)
        for again in range(1 if prompt else MESSAGES_AT_ONCE):
            if again:  # what the runners sent meanwhile (a chunk: two)
                ready, _ = ray.wait(ready, num_returns=len(ready), timeout=0)
            for generator in ready:
                if generator in self.runners or generator in self.splits.running:
                    self.read(generator)
            self.splits.flush()
            ready = [g for g in ready if g in self.runners]
            if not ready:
                break
        if received:  # what the messages made (records, kept to the end) leaves the collector's sight
            gc.freeze()

    def poll(self, prompt: bool) -> float:
        """How long a wait may last: :data:`POLL`; for a few runners once the queue has all the
        work, up to :data:`PROMPT_POLL` (a wait costs the driver CPU), a timeout enforced at most an
        eighth of it late. A message ends the wait at once; a stop (``dispatcher.stop``, set by
        the signal watcher's thread) is seen when it ends."""
        if not prompt or not self.enumeration.over:
            return POLL
        return min(PROMPT_POLL, max(POLL, (self.config.timeout or math.inf) / 8))

    def read(self, generator: ray.ObjectRefGenerator) -> None:
        """The generator's next message, handled; or its end."""
        try:
            message, error = ray.get(next(generator)), None
        except StopIteration:
            message, error = _ENDED, None
        except RayError as e:
            message, error = _ENDED, e
        if generator in self.splits.running:
            if message is _ENDED:
                self.splits.ended(generator, error)
            else:
                self.handlers[type(message)](generator, message)
        elif message is _ENDED:
            self.runner_ended(generator, error)
        else:
            self.report(generator, message)

    def report(self, generator, messages: list) -> None:
        """A runner's report: each of its messages, in order."""
        self.runners.heard(generator)
        for message in messages:
            self.handlers[type(message)](generator, message)

    def runner_ended(self, generator: ray.ObjectRefGenerator, error: RayError | None) -> None:
        runner = self.runners.ended(generator)
        if error is not None:  # the worker died in one of the unreported cases (or listing)
            death = classify(error)
            self.splits.give_up(self.runners.lost(runner, death), death.message)
        elif not runner.careful and self.splits.active:  # out of work before a split case came:
            self.runners.top_up()  # its chunks need every runner

    def enforce_timeouts(self, now: float) -> None:
        if self.config.timeout is None:
            return
        self.splits.give_up(self.runners.timed_out(now), "stopped")
        if stop := self.splits.timed_out(now):  # their chunks too
            self.splits.give_up(self.runners.stop_ids(stop), "stopped")

    def start_splits(self) -> None:
        if self.splits.start_waiting():
            self.runners.top_up()  # runners whose end the driver has read (see runner_ended for the others)

    # -- a runner's messages --------------------------------------------------------------

    def on_ready(self, generator, message: messages.Ready) -> None:
        self.runners[generator].ready = True

    def on_started(self, generator, message: messages.Started) -> None:
        if self.dispatcher.first_dispatch is None:
            self.dispatcher.first_dispatch = time.perf_counter()
        runner, item = self.runners[generator], message.item
        runner.item, runner.current, runner.started = item, 0, item.id
        runner.cases = None if item.group is not None else item.cases

    def on_listed(self, generator, message: messages.Listed) -> None:
        runner = self.runners[generator]
        self.sink.listed(runner.item.group, message.listing)
        runner.cases = message.listing.take(message.head)

    def on_unlisted(self, generator, message: messages.Unlisted) -> None:
        runner = self.runners[generator]
        self.sink.listed(runner.item.group, group_error(runner.item.group, message.message))
        runner.item = None

    def on_finished(self, generator, message: messages.Finished) -> None:
        """The batch goes on as it came; a case that crashed a worker before is settled apart."""
        runner = self.runners[generator]
        for index, _ in message.splits:
            self.splits.add(runner.cases[index])
        if message.splits:
            self.start_splits()
        self.config.store(message.blocks)
        batch, settled, deaths = message.records, [], self.runners.deaths
        if batch and deaths.crashes:
            crashed = [j for j, key in enumerate(batch.keys) if key in deaths.crashes]
            if crashed:
                batch, again = batch.without(crashed)
                settled = [deaths.settle(record) for record in again]
        runner.current = message.upto
        if batch:
            self.sink.emit(batch)
        if settled:
            self.sink.emit(RecordBatch(settled))

    def on_idle(self, generator, message: messages.Idle) -> None:
        runner = self.runners[generator]
        runner.item = runner.chunk = None

    def on_chunk_started(self, generator, message: messages.ChunkStarted) -> None:
        runner = self.runners[generator]
        runner.item, runner.chunk = None, message.key  # a chunk's time is its split case's

    def on_chunk_done(self, generator, message: messages.ChunkDone) -> None:
        """The chunk's result follows in ``generator``: its reference (not its value) goes to
        the split case's coordinator; the driver, its owner, keeps it alive."""
        runner = self.runners[generator]
        runner.chunk = None
        try:
            ref = next(generator)  # yielded right after the message; an error arrives in it
        except StopIteration:
            return  # the task ended: the next wait on it tells how
        self.splits.forward(runner.id, message.key, ref)

    # -- a coordinator's messages ---------------------------------------------------------

    def on_begun(self, generator, message: messages.Begun) -> None:
        self.splits.begun(generator)

    def on_decided(self, generator, message: messages.Decided) -> None:
        self.config.store(message.blocks)
        self.sink.emit(RecordBatch([message.record]))
