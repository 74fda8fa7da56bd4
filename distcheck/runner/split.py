"""Split cases: a case too large for one task runs as ``distcheck.gradcheck`` on the
dispatch's runners, its Jacobians cut into column and row chunks for its share of the workers
(every worker for a lone split case; see ``ray_dispatch.split_share``).

Its coordination (rebuilding the case, planning, handing out the chunks, comparing the
Jacobians, block by block on the workers when they are large) runs on the cluster too, in a
*coordinator*: a long-lived actor process that has loaded the suite once and runs one split
case at a time. The driver only hands it the case and waits for its verdict, so several split
cases run at once, alongside ordinary batches, from the moment a worker finds them. A
coordinator takes no CPU slot of its own (it mostly waits for its chunks). Its chunks go to the
dispatch's queue, and runners run them between their items (:mod:`.chunks`): the driver
forwards each chunk's result to the coordinator, which runs threads for it (``deliver``). One
case at a time in its own process, its global RNG (the suite reseeds it before every call) is
its own.

Coordinators are kept for the driver's Ray job (:class:`Coordinators`, one pool per worker
environment): a slow-mode run starts one before its first dispatch, as the workers are warmed,
so the first split case does not wait for a process to start and load the suite (seconds: torch
and the op database), and every later case, or run, reuses them (before, each split case
started a task, often in a new process). A coordinator whose case timed out or was stopped is
killed; the driver drops its chunks from the queue and stops the runners that run one.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Sequence
from dataclasses import replace

import ray

from distcheck.engines import get_engine
from distcheck.executors.ray_executor import WARM_TIMEOUT, RayResults, warm_libraries
from distcheck.plan.subject import Subject
from distcheck.plan.units import Unit
from distcheck.runner.budget import Budget
from distcheck.runner.case_runner import run_case
from distcheck.runner.chunks import Inbox, QueueResults, queue_executor
from distcheck.runner.judge import distcheck_checker
from distcheck.suites.base import CaseId, Suite


class CountingExecutor:
    """A Ray executor that counts the tasks of one case: its chunks, and its block jobs (the
    comparisons of Jacobians over the block budget, run where the chunks' results are)."""

    name = "ray"

    def __init__(self, inner):
        self._inner = inner
        self.tasks = 0

    @property
    def policy(self):
        return self._inner.policy

    @property
    def workers(self) -> int:
        return self._inner.workers

    def submit(self, subject: Subject, units: Sequence[Unit]) -> QueueResults | RayResults:
        results = self._inner.submit(subject, units)
        self.tasks += results.tasks
        if getattr(results, "blocks", None) is not None:
            results.blocks = _CountedBlocks(results.blocks, self)
        return results


class _CountedBlocks:
    """A block runner whose jobs are counted as the case's tasks."""

    def __init__(self, inner, counter: CountingExecutor):
        self._inner, self._counter = inner, counter
        self.budget = inner.budget

    def run(self, jobs):
        self._counter.tasks += len(jobs)
        return self._inner.run(jobs)


class Coordinator:
    """A Ray actor that runs split cases, one at a time (see the module's doc). ``suite``: the
    suite it loads as it starts (the run's: its first split case finds it loaded)."""

    def __init__(self, suite: Suite):
        self.prepared: set[str] = set()
        self.inbox = Inbox()
        self.prepare(suite)
        warm_libraries()

    def ready(self) -> bool:
        return True

    def prepare(self, suite: Suite) -> None:
        if suite.name not in self.prepared:
            get_engine(suite.engine)  # imports its library (torch: seconds)
            suite.prepare()
            gc.freeze()  # the suite's database stays out of the collector's sight, as in a runner
            self.prepared.add(suite.name)

    def deliver(self, results: list[tuple[tuple[int, int], object]]) -> None:
        """Chunks' results ``(key, payload)``, forwarded by the driver (see :class:`~.chunks.Inbox`)."""
        for key, payload in results:
            self.inbox.deliver(key, payload)

    def run(
        self,
        suite: Suite,
        case: CaseId,
        fingerprint: str | None,
        budget: Budget,
        queue,
        split: int,
        gpus: float | None = None,
        share: int | None = None,
    ):
        """Yields ``None`` when it starts, then ``(outcome, tasks)``: the case checked in
        Jacobian chunks that the dispatch's runners take from ``queue`` (the case's id there:
        ``split``), and how many chunks that took. ``gpus``: the runners' share of a GPU (a
        suite on GPUs: the coordinator itself holds none; it plans for as many chunks as the
        GPUs hold). ``share``: the workers its Jacobians are cut for (the driver's
        :func:`~distcheck.runner.ray_dispatch.split_share`; None: every worker)."""
        yield None
        self.prepare(suite)
        budget = replace(budget, max_bytes=math.inf)  # the case was split: the cluster's memory bounds it
        self.inbox.begin(split)
        executor = CountingExecutor(
            queue_executor(queue, self.inbox, share=share, gpus=gpus, block_bytes=budget.block_bytes)
        )
        outcome = run_case(suite, case, fingerprint, budget, distcheck_checker(executor))
        yield outcome, executor.tasks


class Coordinators:
    """The coordinators of one worker environment in this driver's Ray job: idle ones are
    reused, at most ``most`` run at once (the caller keeps to it)."""

    def __init__(self, env: dict | None):
        # threads: the chunks' results arrive (``deliver``) while ``run`` waits for them
        coordinator = ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0, max_concurrency=8)(Coordinator)
        self._actor = coordinator.options(runtime_env=env)
        self._idle: list[ray.actor.ActorHandle] = []
        self._busy: dict[ray.ObjectRefGenerator, ray.actor.ActorHandle] = {}

    def warm(self, suite: Suite, timeout: float = WARM_TIMEOUT) -> None:
        """Start a coordinator that loads ``suite`` if none is there, and wait until it has (up
        to ``timeout`` seconds): a coordinator is part of a warm cluster, as its warm workers
        are, so that the first split case does not wait for a process to import torch and load
        the suite (on a loaded 2-core machine: 30 s)."""
        if not self._idle and not self._busy:
            actor = self._actor.remote(suite)
            self._idle.append(actor)
            ray.wait([actor.ready.remote()], timeout=timeout)

    def start(self, suite: Suite, case: CaseId, fingerprint: str | None, budget: Budget, *where):
        """The case on an idle coordinator (a new one if none is idle): its generator, see
        :meth:`Coordinator.run` (``where``: its ``queue``, ``split``, ``gpus`` and ``share``)."""
        while self._idle:
            actor = self._idle.pop()
            try:
                generator = actor.run.remote(suite, case, fingerprint, budget, *where)
            except Exception:  # the idle coordinator is gone (its node, or its cluster): drop it
                continue
            self._busy[generator] = actor
            return generator
        actor = self._actor.remote(suite)
        generator = actor.run.remote(suite, case, fingerprint, budget, *where)
        self._busy[generator] = actor
        return generator

    def actor(self, generator: ray.ObjectRefGenerator):
        """The coordinator running the case of ``generator`` (None: it ended)."""
        return self._busy.get(generator)

    def done(self, generator: ray.ObjectRefGenerator, failed: bool = False) -> None:
        """The case of ``generator`` has ended: its coordinator is idle again — unless it
        ``failed`` (the actor died, or raised): then it goes."""
        if failed:
            self.kill(generator)
        elif generator in self._busy:
            self._idle.append(self._busy.pop(generator))

    def kill(self, generator: ray.ObjectRefGenerator) -> None:
        """Stop the case of ``generator`` (timed out, or the run stops): its coordinator is killed,
        and with it its chunk tasks (Ray cannot force-cancel an actor's task)."""
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
    """This driver's pool of coordinators for the worker environment ``env``, in the current Ray
    job (a new Ray, a new pool). Only one pool keeps idle coordinators: a run in another
    environment (a rerun's: fresh processes) stops the others' idle ones."""
    # a job id repeats from one Ray to the next (each cluster's first job is 01000000): the
    # driver's node id tells this Ray from the last one
    context = ray.get_runtime_context()
    key = (context.get_node_id(), context.get_job_id(), repr(env))
    if key not in _pools:
        for pool in _pools.values():
            pool.close_idle()
        _pools[key] = Coordinators(env)
    return _pools[key]
