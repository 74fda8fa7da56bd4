"""A split case's chunks, run by the dispatch's runners between their items.

A split case's coordinator (:mod:`.split`) does not submit Ray tasks: its executor
(:class:`QueueExecutor`) puts the check's chunks — groups of Jacobian units, and the block jobs
that compare Jacobians over the block budget — into the dispatch's queue
(:class:`~distcheck.runner.feed.WorkQueue`), which hands them out before any other work. A
runner runs a chunk between two items and yields its result; the driver forwards the result's
reference (never its value) to the coordinator's :class:`Inbox`. So a split case never stops a
runner: the runners that finish their items first take its chunks, the others go on with
theirs, and no worker process is started for it (before, every runner stopped while a split
case ran, so that Ray tasks could have the CPUs, and most of a large cluster sat idle while a
small split case ran).

The results are owned by the driver (it receives them from the runners' generators), so a
runner that dies later takes none of them with it. A chunk whose runner died runs again, up to
:data:`CHUNK_TRIES` times (the queue keeps count); after that the coordinator gets the loss as
the chunk's units' error, as a Ray task's failure would give it.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import traceback
from collections.abc import Sequence
from dataclasses import dataclass

import ray
from ray.exceptions import RayError

from distcheck.executors.ray_blocks import run_block_job
from distcheck.executors.ray_executor import RayExecutor
from distcheck.executors.ray_tasks import run_units, worker_subject
from distcheck.plan.comparisons import BlockJob, JobOutcome
from distcheck.plan.units import Unit, UnitResult
from distcheck.runner import memory_probe

CHUNK_TRIES = 4  # runs of a chunk whose runner died each time, at most (a Ray task's 1 + max_retries 3)


@dataclass(frozen=True)
class Chunk:
    """A piece of a split case's check: ``units`` against the subject in ``box`` (a nested
    reference), or a block ``job`` over the unit results in ``where`` (nested references).
    ``key``: (the split case's id in the dispatch, the chunk's number); ``tries``: runs lost
    with their runner so far."""

    key: tuple[int, int]
    box: list | None = None
    units: tuple[Unit, ...] = ()
    job: BlockJob | None = None
    where: list | None = None
    tries: int = 0

    @property
    def split(self) -> int:
        return self.key[0]


def run_chunk(chunk: Chunk) -> list[UnitResult] | JobOutcome:
    """Run ``chunk`` in this worker (a runner)."""
    if chunk.job is not None:
        with memory_probe.probe("block job", f"split {chunk.split} job {chunk.key[1]}"):
            return run_block_job(chunk.where, chunk.job)
    units = ", ".join(f"{type(u).__name__} {getattr(u, 'size', 1)}" for u in chunk.units[:4])
    with memory_probe.probe("chunk", f"split {chunk.split} chunk {chunk.key[1]}: {units}") as piece:
        results = run_units(chunk.box, list(chunk.units))
        if piece.enabled:  # the subject is this process's cached copy
            with contextlib.suppress(Exception):
                piece.inputs_of([v.inputs for v in worker_subject(chunk.box[0]).variants.values()])
        return results


class Lost(RuntimeError):
    """A chunk given up: its runner died :data:`CHUNK_TRIES` times."""


class Inbox:
    """Where a coordinator receives its chunks' results: ``[reference]`` (from the driver, which
    got it from the runner), or a message (the chunk was given up). One split case at a time:
    a result of an earlier case (its chunks still running when it ended) is dropped."""

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
        with memory_probe.waiting(), self._ready:
            self._ready.wait_for(lambda: key[1] in self._got or key[1] in self._dropped)
            return self._got.get(key[1], DROPPED)

    def arrived(self, key: tuple[int, int]) -> bool:
        with self._ready:
            return key[1] in self._got


DROPPED = "the chunk was cancelled"


class QueueTasks:
    """A split case's tasks: its chunks go to the dispatch's ``queue``, their results come to
    ``inbox`` (the ``tasks`` of its coordinator's :class:`RayExecutor`)."""

    def __init__(self, queue, inbox: Inbox):
        self._queue, self._inbox = queue, inbox

    def launch(self, box: list, units: Sequence[Unit], groups: list[list[int]], block_bytes: float) -> QueueResults:
        chunks = [Chunk(self._inbox.key(), box, tuple(units[k] for k in members)) for members in groups]
        self._queue.put_chunks.remote(chunks)
        return QueueResults(self._queue, self._inbox, [c.key for c in chunks], groups, block_bytes)


def queue_executor(queue, inbox: Inbox, share: int | None = None, **options) -> RayExecutor:
    """A split case's executor in its coordinator: placement, planning and the subject as on the
    Ray executor, cut for ``share`` workers; its chunks go to the dispatch's ``queue``."""
    return RayExecutor(share=share, tasks=QueueTasks(queue, inbox), **options)


class QueueResults:
    """The results of a check's chunks put in the queue (the interface of
    :class:`~distcheck.executors.ray_executor.RayResults`); ``get`` waits for the chunk holding
    the unit."""

    def __init__(self, queue, inbox: Inbox, keys: list[tuple[int, int]], groups: list[list[int]], block_bytes: float):
        self._queue, self._inbox, self._keys, self._groups = queue, inbox, keys, groups
        self._where = {unit: (task, k) for task, group in enumerate(groups) for k, unit in enumerate(group)}
        self._fetched: dict[int, list[UnitResult]] = {}
        self._refs: dict[int, ray.ObjectRef] = {}
        self._cancelled = False
        self.blocks = QueueBlocks(queue, inbox, self.where, block_bytes)

    @property
    def tasks(self) -> int:
        return len(self._keys)

    def _ref(self, task: int) -> ray.ObjectRef:
        """The reference of the results of chunk ``task`` (a given-up chunk's: its units' errors,
        put here)."""
        if task not in self._refs:
            payload = self._inbox.wait(self._keys[task])
            if isinstance(payload, list):
                (self._refs[task],) = payload
            else:
                self._refs[task] = ray.put([UnitResult(error=Lost(payload), worker="ray") for _ in self._groups[task]])
        return self._refs[task]

    def where(self, index: int) -> tuple[ray.ObjectRef, int]:
        task, k = self._where[index]
        return self._ref(task), k

    def get(self, index: int) -> UnitResult:
        task, k = self._where[index]
        if task not in self._fetched:
            try:
                self._fetched[task] = ray.get(self._ref(task))
            except RayError as e:  # the runner's generator failed as it yielded the result
                failed = traceback.format_exc()
                self._fetched[task] = [UnitResult(error=e, traceback=failed, worker="ray") for _ in self._groups[task]]
        return self._fetched[task][k]

    def close(self) -> None:
        """Give up on the results not collected yet: chunks still queued are dropped (running
        ones finish, their results are dropped)."""
        self._fetched = {}
        self._give_up()

    def cancel(self) -> None:
        """As :meth:`close`; a ``get`` waiting meanwhile returns the cancellation as the unit's
        error. A chunk that runs is not interrupted: a split case that times out has its
        runners stopped by the driver."""
        if not self._cancelled:
            self._cancelled = True
            self.close()

    def _give_up(self) -> None:
        keys = enumerate(self._keys)
        pending = [key for task, key in keys if task not in self._refs and not self._inbox.arrived(key)]
        if pending:
            self._queue.drop_chunks.remote(pending)
            self._inbox.drop(pending)


class QueueBlocks:
    """Runs block jobs as chunks of the queue, next to nothing: a runner fetches each unit's
    result from the object store (see :func:`~distcheck.executors.ray_blocks.run_block_job`)."""

    def __init__(self, queue, inbox: Inbox, where, budget: float):
        self._queue, self._inbox, self.where, self.budget = queue, inbox, where, budget

    def run(self, jobs: Sequence[BlockJob]) -> list[JobOutcome]:
        chunks = []
        for job in jobs:
            units = ([] if job.numerical is None else [job.numerical]) + list(job.analytical)
            chunks.append(Chunk(self._inbox.key(), job=job, where=[{u: self.where(u) for u in units}]))
        self._queue.put_chunks.remote(chunks)
        outcomes = []
        for chunk in chunks:
            payload = self._inbox.wait(chunk.key)
            if not isinstance(payload, list):
                raise Lost(f"a block job of the split case: {payload}")
            outcomes.append(ray.get(payload[0]))
        return outcomes
