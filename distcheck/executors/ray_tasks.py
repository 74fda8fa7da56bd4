"""A check's units as Ray tasks: the body of a task on a worker (:func:`run_units`), and on the
driver the tasks started (:class:`RayTasks`) and their results (:class:`RayResults`).

The subject (functions and inputs) goes to the object store once per check; tasks carry its
reference nested in a list, so that a worker deserializes it once and keeps it (a small
per-process cache) for every later task of the same check. Every task is submitted at once;
results are collected in whatever order the reducer asks for them.
"""

from __future__ import annotations

import collections
import functools
import math
import os
import pickle
import sys
import traceback
from collections.abc import Sequence
from dataclasses import replace

import ray
from ray import cloudpickle
from ray.exceptions import RayError

from distcheck.engines import reference_scope
from distcheck.executors.ray_blocks import RayBlocks
from distcheck.plan.subject import Subject
from distcheck.plan.units import Unit, UnitResult, execute

FORCE_ROUNDS = 3  # kills of a cancelled check's tasks still running, cancel_grace seconds apart

# -- the worker side ----------------------------------------------------------------------

_SUBJECTS: collections.OrderedDict[str, Subject] = collections.OrderedDict()
_SUBJECTS_KEPT = 4  # per worker process: the checks it is working on


def worker_subject(ref: ray.ObjectRef) -> Subject:
    """The check's subject, deserialized once per worker process (least recently used evicted)."""
    key = ref.hex()
    if key in _SUBJECTS:
        _SUBJECTS.move_to_end(key)
    else:
        _SUBJECTS[key] = cloudpickle.loads(ray.get(ref))  # a private, writable copy
        while len(_SUBJECTS) > _SUBJECTS_KEPT:
            _SUBJECTS.popitem(last=False)
    return _SUBJECTS[key]


@functools.cache
def _worker_name() -> str:
    return f"ray pid {os.getpid()} node {ray.get_runtime_context().get_node_id()[:8]}"


def _portable(result: UnitResult) -> UnitResult:
    """The result, with an exception that cannot cross a process boundary replaced by a
    RuntimeError that keeps its type name, message and traceback."""
    if result.error is not None:
        try:
            pickle.loads(cloudpickle.dumps(result.error))
        except Exception:
            name = f"{type(result.error).__module__}.{type(result.error).__qualname__}"
            result = replace(result, error=RuntimeError(f"{name}: {result.error}"))
    return result


def run_units(box: list[ray.ObjectRef], units: list[Unit]) -> list[UnitResult]:
    """Run ``units`` against the subject in ``box`` (a nested reference, so that Ray does not
    fetch and deserialize it for every task) in this worker: the body of a chunk task, and of
    a split case's chunk that a suite runner runs between its items."""
    (ref,) = box
    worker = _worker_name()
    modules = len(sys.modules)
    try:
        subject = worker_subject(ref)  # imports the engine (torch: seconds) in a fresh worker
    except Exception as e:  # e.g. the function's module cannot be imported on this node
        failed = _portable(UnitResult(error=e, traceback=traceback.format_exc(), worker=worker))
        return [replace(failed) for _ in units]
    except BaseException:  # cancelled while loading the subject
        if len(sys.modules) != modules:  # in the middle of an import: half-imported modules
            os._exit(1)  # would break every later task here; Ray replaces the worker
        raise
    try:
        with reference_scope():  # one reference call for this task's backward passes
            return [_portable(execute(unit, subject, 1, worker)) for unit in units]
    except BaseException:  # cancelled in the middle of a unit: an input may be left perturbed
        _SUBJECTS.pop(ref.hex(), None)
        raise


_run_units = ray.remote(num_cpus=1)(run_units)


# -- the driver side ----------------------------------------------------------------------


class RayTasks:
    """Starts a check's tasks as Ray tasks: ``max_retries`` after a lost worker, ``gpus`` a
    task's share of a GPU (None: CPUs only), ``cancel_grace`` seconds between the rounds of
    :meth:`RayResults.cancel`. An executor's ``tasks`` may be another object with this
    :meth:`launch` (a split case's: its tasks go to a dispatch's queue)."""

    def __init__(self, max_retries: int = 3, gpus: float | None = None, cancel_grace: float = 1.0):
        self.max_retries, self.gpus, self.cancel_grace = max_retries, gpus, cancel_grace

    def launch(self, box: list, units: Sequence[Unit], groups: list[list[int]], block_bytes: float) -> RayResults:
        """Run ``units`` against the subject in ``box`` in tasks of ``groups`` (indices into
        ``units``); Jacobians over ``block_bytes`` are compared where the results are."""
        run = _run_units.options(max_retries=self.max_retries, **({"num_gpus": self.gpus} if self.gpus else {}))
        refs = [run.remote(box, [units[k] for k in members]) for members in groups]
        return RayResults(refs, groups, self.cancel_grace, block_bytes)


class RayResults:
    """Results of tasks submitted all at once; ``get`` blocks on the task holding the unit."""

    def __init__(
        self, refs: list[ray.ObjectRef], groups: list[list[int]], cancel_grace: float, block_bytes: float = math.inf
    ):
        self._refs, self._groups, self._grace = refs, groups, cancel_grace
        self._where = {unit: (task, k) for task, group in enumerate(groups) for k, unit in enumerate(group)}
        self._fetched: dict[int, list[UnitResult]] = {}
        self._cancelled = False
        # Jacobians larger than the block budget are compared where they are, never fetched here
        self.blocks = RayBlocks(self.where, block_bytes)

    def where(self, index: int) -> tuple[ray.ObjectRef, int]:
        """The reference of the results of the task holding unit ``index``, and its index there."""
        task, k = self._where[index]
        return self._refs[task], k

    @property
    def tasks(self) -> int:
        return len(self._refs)

    def get(self, index: int) -> UnitResult:
        task, k = self._where[index]
        if task not in self._fetched:
            try:
                self._fetched[task] = ray.get(self._refs[task])
            except RayError as e:  # the task itself failed: worker or node lost, out of memory, cancelled
                failed = traceback.format_exc()
                self._fetched[task] = [UnitResult(error=e, traceback=failed, worker="ray") for _ in self._groups[task]]
        return self._fetched[task][k]

    def close(self) -> None:
        """Give up on the results not collected yet. Their tasks are *not* cancelled: they
        finish and their results are dropped (a check stops collecting at its first failure,
        so this costs at most the rest of that check's work). Cancelling a task at the moment
        it completes crashes the driver in Ray 2.60 (a failed internal check, "Tried to
        complete task that was not pending"), so only :meth:`cancel` cancels."""
        self._fetched = {}

    def cancel(self) -> None:
        """Stop the tasks whose results were not collected: queued ones are dropped, running
        ones interrupted; those still running after ``cancel_grace`` seconds (stuck in a C
        call) are killed with their worker process, and so, ``cancel_grace`` seconds later, are
        those still not ended then: a task already pushed to a worker but not started when it
        was cancelled can start after the first kill (a race of Ray's cancellation), and would
        hold its CPU for as long as it runs. For timeouts: see :meth:`close` for the (small)
        risk it runs. May be called from another thread while ``get`` waits: that
        ``get`` then returns the task's cancellation as the unit's error."""
        if self._cancelled:
            return
        self._cancelled = True
        pending = [ref for task, ref in enumerate(self._refs) if task not in self._fetched]
        self._fetched = {}
        if not pending:
            return
        _, pending = ray.wait(pending, num_returns=len(pending), timeout=0)  # finished ones stay alone
        for ref in pending:
            ray.cancel(ref)
        running = pending
        for _ in range(FORCE_ROUNDS):
            _, running = ray.wait(running, num_returns=len(running), timeout=self._grace)
            if not running:
                return
            for ref in running:
                ray.cancel(ref, force=True)
