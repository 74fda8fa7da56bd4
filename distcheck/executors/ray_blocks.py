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
        refs = []
        for job in jobs:
            units = ([] if job.numerical is None else [job.numerical]) + list(job.analytical)
            refs.append(_run_job.remote([{u: self.where(u) for u in units}], job))
        self.tasks += len(refs)
        return ray.get(refs)
