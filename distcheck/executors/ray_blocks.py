"""Block jobs on Ray: each a task next to the unit results it compares.

A job's task receives the references of the units' results nested in a list (so that Ray does
not fetch them all before it starts) and fetches them one at a time: a numerical result, then
each analytical one, dropped once compared. What it returns is small: the units' errors and
attributes, the tiles' summaries (see :mod:`distcheck.plan.comparisons`).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence

import ray
from ray.exceptions import RayError

from distcheck.plan.comparisons import BlockJob, JobOutcome, run_job
from distcheck.plan.units import UnitResult


def run_block_job(pieces: list[dict[int, tuple[ray.ObjectRef, int]]], job: BlockJob) -> JobOutcome:
    """Run ``job`` in this worker, fetching its units' results from the object store (the body
    of a block job's task, and of a split case's block job that a suite runner runs)."""
    (where,) = pieces

    def fetch(unit: int) -> UnitResult:
        ref, k = where[unit]
        try:
            return ray.get(ref)[k]
        except RayError as e:  # the unit's task failed: worker or node lost, out of memory, cancelled
            return UnitResult(error=e, traceback=traceback.format_exc(), worker="ray")

    return run_job(job, fetch)


_run_job = ray.remote(num_cpus=1)(run_block_job)


class RayBlocks:
    """Runs block jobs as Ray tasks; ``where(unit)`` is ``(reference of its task's results,
    its index there)``."""

    def __init__(self, where: Callable[[int], tuple[ray.ObjectRef, int]], budget: float):
        self.where, self.budget = where, budget
        self.tasks = 0

    def run(self, jobs: Sequence[BlockJob]) -> list[JobOutcome]:
        """Each job's task is submitted once the results it compares are all made (not fetched
        here): a task that waited for them in ``ray.get`` would give its CPU back to Ray, which
        would start a new worker process, cold (torch imported again), for the next chunk
        task in the queue, and on any Ray but one of distcheck's own keep it."""
        wanted = [{u: self.where(u) for u in _units(job)} for job in jobs]
        waiting = {k: {ref for ref, _ in pieces.values()} for k, pieces in enumerate(wanted)}
        made: set[ray.ObjectRef] = set()
        refs: dict[int, ray.ObjectRef] = {}
        while waiting:
            for k in [k for k, needs in waiting.items() if needs <= made]:
                refs[k] = _run_job.remote([wanted[k]], jobs[k])
                del waiting[k]
            unmade = list({ref for needs in waiting.values() for ref in needs} - made)
            if unmade:
                ready, _ = ray.wait(unmade, num_returns=1, fetch_local=False)
                made.update(ready)
        self.tasks += len(refs)
        return ray.get([refs[k] for k in range(len(jobs))])


def _units(job: BlockJob) -> list[int]:
    return ([] if job.numerical is None else [job.numerical]) + list(job.analytical)
