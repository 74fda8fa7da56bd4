"""A split case's coordinator: a Ray actor that checks one split case at a time, its tasks put in
the work queue as chunks (:class:`QueueTasks`) and their results delivered by the driver to its
:class:`Inbox`; and the pool of coordinators a driver keeps (:func:`coordinators`)."""

from __future__ import annotations

import contextlib
import itertools
import math
import threading
import traceback
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import ray
from ray.exceptions import RayError

from distcheck.case import probe
from distcheck.case.run import prepare, recorded, run_case
from distcheck.executors.ray_executor import WARM_TIMEOUT, RayExecutor, warm_libraries
from distcheck.plan.comparisons import BlockJob, JobOutcome
from distcheck.plan.units import Unit, UnitResult
from distcheck.runner.messages import Begun, Decided
from distcheck.runner.split.chunks import Chunk
from distcheck.suites.base import CaseInfo, Suite

DROPPED = "the chunk was cancelled"


class Inbox:
    """Where a coordinator receives its chunks' results: ``[reference]`` (forwarded by the
    driver), or a message (the chunk was given up). One split case at a time: a result of an
    earlier case (its chunks still running when it ended) is dropped."""

    def __init__(self):
        self._ready = threading.Condition()
        self._split: int | None = None
        self._numbers = itertools.count()
        self._got: dict[int, object] = {}
        self._dropped: set[int] = set()

    def begin(self, split: int) -> None:
        with self._ready:
            self._split, self._got, self._dropped = split, {}, set()

    def key(self) -> tuple[int, int]:
        return (self._split, next(self._numbers))

    def deliver(self, key: tuple[int, int], payload) -> None:
        with self._ready:
            if key[0] == self._split and key[1] not in self._dropped:
                self._got[key[1]] = payload
                self._ready.notify_all()

    def drop(self, keys: Sequence[tuple[int, int]]) -> None:
        """Give up on ``keys``: whoever waits for one gets :data:`DROPPED`."""
        with self._ready:
            for key in keys:
                self._got.pop(key[1], None)
                self._dropped.add(key[1])
            self._ready.notify_all()

    def wait(self, key: tuple[int, int]):
        hook = probe.hook()
        with contextlib.nullcontext() if hook is None else hook.waiting(), self._ready:
            self._ready.wait_for(lambda: key[1] in self._got or key[1] in self._dropped)
            return self._got.get(key[1], DROPPED)

    def arrived(self, key: tuple[int, int]) -> bool:
        with self._ready:
            return key[1] in self._got


class Lost(RuntimeError):
    """A chunk given up: its runner died :data:`~.chunks.CHUNK_TRIES` times."""


class QueueTasks:
    """A split case's tasks (a :class:`~distcheck.executors.ray_tasks.RayTasks` in the Ray
    executor of its coordinator): chunks put in the dispatch's ``queue``, their results awaited
    in ``inbox``. ``count``: the chunks and block jobs so far (the case's record's tasks)."""

    def __init__(self, queue, inbox: Inbox):
        self.queue, self.inbox, self.count = queue, inbox, 0

    def put(self, chunks: list[Chunk]) -> None:
        self.count += len(chunks)
        self.queue.put_chunks.remote(chunks)

    def launch(self, box: list, units: Sequence[Unit], groups: list[list[int]], block_bytes: float) -> QueueResults:
        chunks = [Chunk(self.inbox.key(), box, tuple(units[k] for k in members)) for members in groups]
        self.put(chunks)
        return QueueResults(self, [c.key for c in chunks], groups, block_bytes)

    def ref(self, key: tuple[int, int], units: int) -> ray.ObjectRef:
        """The reference of chunk ``key``'s results (a given-up chunk's: its units' errors)."""
        payload = self.inbox.wait(key)
        if isinstance(payload, list):
            return payload[0]
        return ray.put([UnitResult(error=Lost(payload), worker="ray") for _ in range(units)])


class QueueResults:
    """The results of a check's chunks (the :class:`~distcheck.executors.base.Results` of
    :class:`QueueTasks`): ``get`` waits for the chunk that holds the unit."""

    def __init__(self, tasks: QueueTasks, keys: list[tuple[int, int]], groups: list[list[int]], block_bytes: float):
        self._tasks, self._keys, self._groups = tasks, keys, groups
        self._where = {unit: (task, k) for task, group in enumerate(groups) for k, unit in enumerate(group)}
        self._fetched: dict[int, list[UnitResult]] = {}
        self._refs: dict[int, ray.ObjectRef] = {}
        self.blocks = QueueBlocks(tasks, self.where, block_bytes)

    def where(self, index: int) -> tuple[ray.ObjectRef, int]:
        task, k = self._where[index]
        if task not in self._refs:
            self._refs[task] = self._tasks.ref(self._keys[task], len(self._groups[task]))
        return self._refs[task], k

    def get(self, index: int) -> UnitResult:
        task, k = self._where[index]
        if task not in self._fetched:
            try:
                self._fetched[task] = ray.get(self.where(index)[0])
            except RayError as e:  # the runner's generator failed as it yielded the result
                failed = traceback.format_exc()
                self._fetched[task] = [UnitResult(error=e, traceback=failed, worker="ray") for _ in self._groups[task]]
        return self._fetched[task][k]

    def close(self) -> None:
        """Give up on the results not collected yet: chunks still queued are dropped (running
        ones finish, their results are dropped; a timed-out case's runners are stopped)."""
        self._fetched = {}
        inbox = self._tasks.inbox
        pending = [key for task, key in enumerate(self._keys) if task not in self._refs and not inbox.arrived(key)]
        if pending:
            self._tasks.queue.drop_chunks.remote(pending)
            inbox.drop(pending)

    cancel = close


class QueueBlocks:
    """Runs block jobs as chunks: a runner fetches each unit's result from the object store (see
    :func:`~distcheck.executors.ray_blocks.run_block_job`)."""

    def __init__(self, tasks: QueueTasks, where, budget: float):
        self._tasks, self.where, self.budget = tasks, where, budget

    def run(self, jobs: Sequence[BlockJob]) -> list[JobOutcome]:
        chunks = []
        for job in jobs:
            units = ([] if job.numerical is None else [job.numerical]) + list(job.analytical)
            chunks.append(Chunk(self._tasks.inbox.key(), job=job, where=[{u: self.where(u) for u in units}]))
        self._tasks.put(chunks)
        outcomes = []
        for chunk in chunks:
            payload = self._tasks.inbox.wait(chunk.key)
            if not isinstance(payload, list):
                raise Lost(f"a block job of the split case: {payload}")
            outcomes.append(ray.get(payload[0]))
        return outcomes


class Coordinator:
    """A Ray actor that runs split cases, one at a time. ``suite``: loaded as it starts."""

    def __init__(self, suite: Suite):
        self.inbox = Inbox()
        prepare(suite)
        warm_libraries()

    def ready(self) -> bool:
        return True

    def deliver(self, results: list[tuple[tuple[int, int], object]]) -> None:
        """Chunks' results ``(key, payload)``, forwarded by the driver (see :class:`Inbox`)."""
        for key, payload in results:
            self.inbox.deliver(key, payload)

    def run(self, config, case: CaseInfo, queue, split: int, share: int):
        """Yields :class:`Begun`, then :class:`Decided`: ``case`` checked in chunks that the
        dispatch's runners take from ``queue`` (the case's id there: ``split``), cut for
        ``share`` workers; its record's tasks are its chunks and block jobs."""
        yield Begun()
        prepare(config.suite)
        budget = replace(config.split_budget, max_bytes=math.inf)  # the cluster's memory bounds it
        self.inbox.begin(split)
        tasks = QueueTasks(queue, self.inbox)
        executor = RayExecutor(share=share, tasks=tasks, gpus=config.gpus_per_runner, block_bytes=budget.block_bytes)
        outcome = run_case(config.suite, case.id, case.fingerprint, budget, executor, config.vectorize)
        yield Decided(*recorded(case, outcome, tasks.count, config.keeps_blocks))


class Coordinators:
    """The coordinators of one worker environment ``env`` in this driver's Ray job
    (:func:`coordinators`): idle ones are reused. ``start``: starts a coordinator that loads a
    suite (default: a :class:`Coordinator` actor in ``env``)."""

    def __init__(self, env: dict | None, start: Callable[[Suite], Any] | None = None):
        # threads: the chunks' results arrive (``deliver``) while ``run`` waits for them
        coordinator = ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0, max_concurrency=8)(Coordinator)
        self._new = start or coordinator.options(runtime_env=env).remote
        self._idle: list = []
        self._busy: dict[ray.ObjectRefGenerator, object] = {}

    def warm(self, suite: Suite) -> None:
        """Start a coordinator that loads ``suite`` if none is there, and wait until it has (up
        to the warm-up's timeout): the first split case does not wait for a process to import
        torch and load the suite."""
        if not self._idle and not self._busy:
            actor = self._new(suite)
            self._idle.append(actor)
            ray.wait([actor.ready.remote()], timeout=WARM_TIMEOUT)

    def start(self, suite: Suite, config_ref, case: CaseInfo, *where) -> ray.ObjectRefGenerator:
        """The case on an idle coordinator (a new one, that loads ``suite``, if none is idle):
        its generator, see :meth:`Coordinator.run` (``config_ref``: the run's configuration;
        ``where``: its queue, split id and share)."""
        while True:
            fresh = not self._idle
            actor = self._new(suite) if fresh else self._idle.pop()
            try:
                generator = actor.run.remote(config_ref, case, *where)
            except Exception:  # an idle coordinator gone (its node, or its cluster): dropped
                if fresh:
                    raise
                continue
            self._busy[generator] = actor
            return generator

    def actor(self, generator: ray.ObjectRefGenerator):
        """The coordinator running the case of ``generator`` (None: it ended)."""
        return self._busy.get(generator)

    def done(self, generator: ray.ObjectRefGenerator, failed: bool = False) -> None:
        """The case of ``generator`` has ended: its coordinator is idle again, unless it
        ``failed`` (the actor died, or raised): then it goes."""
        if failed:
            self.kill(generator)
        elif generator in self._busy:
            self._idle.append(self._busy.pop(generator))

    def kill(self, generator: ray.ObjectRefGenerator) -> None:
        """Stop the case of ``generator``: its coordinator is killed (Ray cannot force-cancel an
        actor's task)."""
        actor = self._busy.pop(generator, None)
        if actor is not None:
            ray.kill(actor)

    def close_idle(self) -> None:
        """Stop the idle coordinators (their processes hold a suite's database)."""
        for actor in self._idle:
            try:
                ray.kill(actor)
            except Exception:  # already gone with its cluster
                pass
        self._idle = []


_pools: dict[tuple, Coordinators] = {}


def coordinators(env: dict | None) -> Coordinators:
    """This driver's coordinators for the worker environment ``env``, in the current Ray job (a
    new Ray, new ones). Only one pool keeps idle coordinators: a run in another environment (a
    rerun's: fresh processes) stops the others' idle ones."""
    # a job id repeats from one Ray to the next (each cluster's first job is 01000000): the
    # driver's node id tells this Ray from the last one
    context = ray.get_runtime_context()
    key = (context.get_node_id(), context.get_job_id(), repr(env))
    if key not in _pools:
        for pool in _pools.values():
            pool.close_idle()
        _pools[key] = Coordinators(env)
    return _pools[key]
