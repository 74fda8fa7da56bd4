"""Split cases: a case too large for one task runs as ``distcheck.gradcheck`` on the Ray
executor, which cuts its Jacobians into column and row chunks over every worker.

Its coordination (rebuilding the case, planning, submitting the chunks, assembling and
comparing the Jacobians) runs on the cluster too, in a task of its own: the driver only starts
it and waits for its verdict, so several split cases run at once, alongside ordinary batches,
from the moment a worker finds them. The coordinator takes no CPU slot of its own (it mostly
waits for its chunks; its chunks take the slots). It runs in its own worker process, so its
global RNG (the suite reseeds it before every call) is its own. Cancelling it with
``recursive=True`` cancels its chunk tasks; killing its worker leaves them without an owner,
and Ray stops them too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import ray

from distcheck.executors.ray_executor import RayExecutor, RayResults
from distcheck.plan.subject import Subject
from distcheck.plan.units import Unit
from distcheck.runner.budget import Budget
from distcheck.runner.case_runner import run_case
from distcheck.runner.judge import distcheck_checker
from distcheck.suites.base import CaseId, Suite


class CountingExecutor:
    """A Ray executor that counts the tasks of one case."""

    name = "ray"

    def __init__(self, inner: RayExecutor):
        self._inner = inner
        self.tasks = 0

    @property
    def policy(self):
        return self._inner.policy

    @property
    def workers(self) -> int:
        return self._inner.workers

    def submit(self, subject: Subject, units: Sequence[Unit]) -> RayResults:
        results = self._inner.submit(subject, units)
        self.tasks += results.tasks
        return results


@ray.remote(num_cpus=0, max_retries=0, num_returns="streaming")
def run_split(suite: Suite, case: CaseId, fingerprint: str | None, budget: Budget, gpus: float | None = None):
    """Yields ``None`` when it starts, then ``(outcome, tasks)``: the case checked in Jacobian
    chunks over the cluster, and how many tasks that took. ``gpus``: each chunk task's share of
    a GPU (a suite on GPUs; the coordinator itself holds none)."""
    suite.prepare()
    yield None
    budget = replace(budget, max_bytes=math.inf)  # the case was split: the cluster's memory bounds it
    executor = CountingExecutor(RayExecutor(gpus=gpus, block_bytes=budget.block_bytes))
    outcome = run_case(suite, case, fingerprint, budget, distcheck_checker(executor))
    yield outcome, executor.tasks
