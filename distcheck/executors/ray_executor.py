"""The Ray executor: a check's units run as Ray tasks, on a local Ray or on a cluster.

- Units are grouped into tasks by the executor's policy (:class:`~distcheck.plan.cost_model.CostModel`
  by default: chunks of a target duration; a small check is one task), and the tasks started
  by its ``tasks`` (:class:`~distcheck.executors.ray_tasks.RayTasks`: Ray tasks, see
  :mod:`.ray_tasks`). Closing the results (after a failure) lets the remaining tasks finish and
  drops their results; cancelling them (a suite's timeout) stops them.
- A check placed in-process (:meth:`RayExecutor.place`) runs its units here, lazily, as the
  serial executor does (one intra-op thread: the same numbers): its estimated work (the cost
  model's timings of one evaluation and one backward pass) is under ``local_below`` seconds, so
  that a Ray round trip and the workers' parallelism cannot win it back; or its subject cannot
  be pickled (an aten overload, a custom op). ``executor="ray"`` places checks under
  :data:`LOCAL_BELOW` seconds in-process; ``RayExecutor()`` itself puts every picklable check
  on Ray unless given ``local_below``.
- Workers run engine math on one intra-op thread (as the serial executor does, so that the
  numbers are bitwise identical), with ``OMP_NUM_THREADS=1`` so that N tasks use N cores.

Starting Ray and warming its workers: :mod:`.ray_start` (``ensure_ray``).
"""

from __future__ import annotations

import io
import pickle
import sys
import time
import weakref
from collections.abc import Sequence
from dataclasses import replace

import ray
from ray import cloudpickle

from distcheck.executors.ray_settings import (
    ADDRESS_VARIABLE,
    CPUS_VARIABLE,
    LOCAL_BELOW,
    LOCAL_BELOW_VARIABLE,
    JacobianBudgetError,
    LocalResults,
    check_jacobian_budget,
    default_block_bytes,
    default_max_jacobian_bytes,
    is_small,
    local_below,
    local_cpus,
    planned_workers,
    resolve_address,
    settled_below,
    stop_ray,
    take_by_value,
)
from distcheck.executors.ray_start import WARM_TIMEOUT, cluster_cpus, cluster_gpus, ensure_ray, warm_libraries
from distcheck.executors.ray_tasks import RayResults, RayTasks
from distcheck.plan.chunking import ChunkPolicy
from distcheck.plan.cost_model import CostModel
from distcheck.plan.subject import Subject
from distcheck.plan.units import Unit

__all__ = [  # with the Ray-free settings of ray_settings and the starting of Ray, re-exported
    "ADDRESS_VARIABLE",
    "CPUS_VARIABLE",
    "LOCAL_BELOW",
    "LOCAL_BELOW_VARIABLE",
    "JacobianBudgetError",
    "WARM_TIMEOUT",
    "LocalResults",
    "RayExecutor",
    "RayResults",
    "RayTasks",
    "cluster_cpus",
    "cluster_gpus",
    "default_block_bytes",
    "ensure_ray",
    "local_below",
    "local_cpus",
    "resolve_address",
    "stop_ray",
    "warm_libraries",
]


def dumps_subject(subject: Subject) -> bytes:
    """``subject`` pickled for the workers (cloudpickle: functions of test modules by value).
    torch's operators (``torch.ops.aten.convolution``, ``....default``) go by name: pybind11's
    function records in them cannot be pickled, and every worker has torch's operators."""
    for module in take_by_value():  # test modules (the pytest plugin), which workers cannot import
        cloudpickle.register_pickle_by_value(module)
    buffer = io.BytesIO()
    _SubjectPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(subject)
    return buffer.getvalue()


class _SubjectPickler(cloudpickle.CloudPickler):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._by_name = {}
        if "torch" in sys.modules:
            from distcheck.engines.torch_tensors import operator_reducers

            self._by_name = operator_reducers()

    def reducer_override(self, obj):
        reduce = self._by_name.get(type(obj))
        return reduce(obj) if reduce is not None else super().reducer_override(obj)


class RayExecutor:
    """Runs a check's units as Ray tasks.

    ``address``: where to run (see :func:`ensure_ray`; None: a local Ray on all cores, unless
    ``$DISTCHECK_RAY_ADDRESS`` or ``$RAY_ADDRESS`` names a cluster). Ray is initialized on
    first use, or reused if it already is. ``policy``: how the planner cuts work into units
    (default: a :class:`CostModel` sized for the cluster's CPUs); a policy with a ``tasks``
    method also groups units into tasks. ``runtime_env``: extra Ray runtime environment.
    ``gpus``: each task's share of a GPU (a check of tensors on GPUs; None: CPUs only), and
    ``workers`` counts the tasks the cluster's GPUs hold at once.
    ``block_bytes``: the block budget (default ``$DISTCHECK_BLOCK_MB``, else 64 MB): a
    comparison whose Jacobians need more runs block by block on the workers, and the cost
    model keeps every unit's result under half of it.
    ``local_below``: seconds of estimated work under which a check runs in-process (needs a
    policy that measures costs; 0: never for that reason). A check whose subject cannot be
    pickled always runs in-process. ``share``: the workers a check is cut for, a share of the
    cluster's (None: all of them; never more). ``tasks``: what starts a check's tasks (default
    :class:`RayTasks` of ``max_retries``, ``gpus`` and ``cancel_grace``).
    ``max_jacobian_mb``: a slow-mode check whose numerical and analytical Jacobians need more is
    refused with :class:`JacobianBudgetError` before it runs (on Ray they sit in the object
    store, spilled to disk when it is full; default ``$DISTCHECK_MAX_JACOBIAN_MB``, else a
    quarter of this machine's RAM; ``math.inf``: none).
    """

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        *,
        policy: ChunkPolicy | None = None,
        runtime_env: dict | None = None,
        max_retries: int = 3,
        cancel_grace: float = 1.0,
        gpus: float | None = None,
        block_bytes: float | None = None,
        local_below: float = 0.0,
        share: int | None = None,
        tasks: RayTasks | None = None,
        max_jacobian_mb: float | None = None,
    ):
        self.block_bytes = default_block_bytes() if block_bytes is None else block_bytes
        self.max_jacobian_bytes = default_max_jacobian_bytes() if max_jacobian_mb is None else max_jacobian_mb * 2**20
        self.address, self.runtime_env, self.gpus = address, runtime_env, gpus
        self.local_below, self.share = local_below, share
        self.tasks = tasks if tasks is not None else RayTasks(max_retries, gpus, cancel_grace)
        self._policy = policy if policy is not None else CostModel()
        self._subject_refs: dict[int, ray.ObjectRef] = {}
        self._placed: dict[int, str] = {}  # where each live subject's check runs
        self._cpus: tuple[float, int] | None = None  # (when asked, CPUs)

    @property
    def workers(self) -> int:
        """The tasks that run at once: the cluster's (see :meth:`cluster_workers`), or the
        executor's share of them."""
        cluster = self.cluster_workers()
        return cluster if self.share is None else max(1, min(self.share, cluster))

    def cluster_workers(self) -> int:
        """CPUs in the cluster (asked at most every few seconds: clusters grow and shrink), or
        the tasks its GPUs hold. Before a local Ray is started, the CPUs it will have: planning a
        check that then runs in-process starts no Ray (starting one, and warming its workers,
        costs seconds of CPU)."""
        if not (self.gpus or ray.is_initialized()):
            planned = planned_workers(self.address)
            if planned is not None:
                return planned
        ensure_ray(self.address, self.runtime_env)
        if self._cpus is None or time.monotonic() - self._cpus[0] > 5.0:
            cpus = cluster_cpus()
            if self.gpus:
                cpus = max(1, min(cpus, int(cluster_gpus() / self.gpus + 1e-9)))
            self._cpus = (time.monotonic(), cpus)
        return self._cpus[1]

    @property
    def policy(self) -> ChunkPolicy:
        """The planner's policy; a cost model for the executor's workers (for a share of the
        cluster, in more rounds: see :meth:`CostModel.rounds`)."""
        if isinstance(self._policy, CostModel):
            return replace(
                self._policy,
                workers=self.workers,
                cluster=0 if self.share is None else self.cluster_workers(),
                block_bytes=self.block_bytes,
                settled_below=settled_below(self._policy, self.local_below),
            )
        return self._policy

    def place(self, subject: Subject, units: Sequence[Unit]) -> str:
        """Where a check runs: "ray", or in-process: "small" (estimated work under
        ``local_below`` seconds) or "unpicklable" (its subject cannot be sent to workers).
        JacobianBudgetError, before Ray is started, for a check over the Jacobian budget."""
        if is_small(subject, units, self.local_below):
            return "small"
        try:
            pickled = dumps_subject(subject)
        except Exception:  # pickling raises whatever the object's __reduce__ raises
            return "unpicklable"
        check_jacobian_budget(units, self.max_jacobian_bytes)
        ensure_ray(self.address, self.runtime_env)
        self._subject_ref(subject, pickled)
        return "ray"

    def submit(self, subject: Subject, units: Sequence[Unit]) -> RayResults | LocalResults:
        where = self._placed.get(id(subject)) or self.place(subject, units)
        if id(subject) not in self._placed:  # later submissions of the check go where it went
            self._placed[id(subject)] = where
            weakref.finalize(subject, self._placed.pop, id(subject), None)
        if where != "ray":
            return LocalResults(subject, units, where)
        ensure_ray(self.address, self.runtime_env)
        box = [self._subject_ref(subject)]
        tasks = getattr(self.policy, "tasks", None)  # with the block budget: a task holds at most half
        groups = tasks(units, subject.costs) if tasks else [[k] for k in range(len(units))]
        return self.tasks.launch(box, units, groups, self.block_bytes)

    def _subject_ref(self, subject: Subject, pickled: bytes | None = None) -> ray.ObjectRef:
        """The subject in the object store: put once per check (later submissions of the same
        subject, e.g. units run to explain a failure, reuse it); released with the subject."""
        key = id(subject)
        if key not in self._subject_refs:
            self._subject_refs[key] = ray.put(dumps_subject(subject) if pickled is None else pickled)
            weakref.finalize(subject, self._subject_refs.pop, key, None)
        return self._subject_refs[key]

    def __repr__(self) -> str:
        return f"RayExecutor(address={self.address!r}, policy={self._policy!r})"
