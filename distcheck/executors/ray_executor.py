"""The Ray executor: a check's units run as Ray tasks, on a local Ray or on a cluster.

- The subject (functions and inputs) goes to the object store once per check; tasks carry its
  reference nested in a list, so that a worker deserializes it once and keeps it (a small
  per-process cache) for every later task of the same check.
- Units are grouped into tasks by the executor's policy (:class:`~distcheck.plan.cost_model.CostModel`
  by default: chunks of a target duration; a small check is one task). Every task is
  submitted at once; results are collected in whatever order the reducer asks for them.
  Closing the results (after a failure) lets the remaining tasks finish and drops their
  results; cancelling them (a suite runner's timeout) stops them.
- A check placed in-process (:meth:`RayExecutor.place`) runs its units here, lazily, as the
  serial executor does (one intra-op thread: the same numbers): its estimated work (the cost
  model's timings of one evaluation and one backward pass) is under ``local_below`` seconds, so
  that a Ray round trip and the workers' parallelism cannot win it back; or its subject cannot
  be pickled (an aten overload, a custom op). ``executor="ray"`` places checks under
  :data:`LOCAL_BELOW` seconds in-process; ``RayExecutor()`` itself puts every picklable check
  on Ray unless given ``local_below``.
- Workers run engine math on one intra-op thread (as the serial executor does, so that the
  numbers are bitwise identical), with ``OMP_NUM_THREADS=1`` so that N tasks use N cores.

``ensure_ray(address)`` initializes Ray once per process (or reuses a Ray that is already
initialized); other code that submits its own tasks (a suite runner) can call it too. The first
time a driver uses Ray through it, every worker slot imports what checks need (distcheck, and
the autodiff libraries the driver has imported: torch takes seconds), all at once, before it
returns: a worker that starts cold would make the first check pay for it.
"""

from __future__ import annotations

import collections
import functools
import importlib
import io
import math
import os
import pickle
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Sequence
from dataclasses import replace

import ray
from ray import cloudpickle
from ray.exceptions import RayError

from distcheck.engines import get_engine, reference_scope, registry
from distcheck.executors.ray_blocks import RayBlocks
from distcheck.executors.ray_settings import (
    ADDRESS_VARIABLE,
    CPUS_VARIABLE,
    LOCAL_BELOW,
    LOCAL_BELOW_VARIABLE,
    LocalResults,
    default_block_bytes,
    is_small,
    local_below,
    local_cpus,
    planned_workers,
    resolve_address,
    settled_below,
    take_by_value,
)
from distcheck.executors.session_ray import request_address, session_folder
from distcheck.plan.chunking import ChunkPolicy
from distcheck.plan.cost_model import CostModel
from distcheck.plan.subject import Subject
from distcheck.plan.units import Unit, UnitResult, execute

__all__ = [  # with the Ray-free settings of ray_settings, re-exported
    "ADDRESS_VARIABLE",
    "CPUS_VARIABLE",
    "LOCAL_BELOW",
    "LOCAL_BELOW_VARIABLE",
    "LocalResults",
    "RayExecutor",
    "RayResults",
    "cluster_cpus",
    "default_block_bytes",
    "ensure_ray",
    "local_below",
    "local_cpus",
    "resolve_address",
]

# Environment of every worker this driver starts: one thread per task, whatever the library.
WORKER_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# A task killed by Ray's memory monitor is retried this many times (Ray's default: forever).
TASK_OOM_RETRIES = 2
FORCE_ROUNDS = 3  # kills of a cancelled check's tasks still running, cancel_grace seconds apart
_TOKEN_VARIABLES = ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
# What a worker imports to be warm: distcheck's side of a task, and the library of every engine
# whose library the driver has imported (they are what deserializing a check's subject imports).
WARM_MODULES = ("distcheck.plan.units", "distcheck.executors.ray_executor")
WARM_TIMEOUT = 120.0  # seconds a warm-up may take before distcheck goes on without it
_init_lock = threading.Lock()
_warmed_jobs: set[str] = set()


def ensure_ray(address: str | None = None, runtime_env: dict | None = None, *, warm: bool = True) -> None:
    """Initialize Ray in this process unless it already is (an initialized Ray is reused as is).

    ``address``: None means ``$DISTCHECK_RAY_ADDRESS``, else ``$RAY_ADDRESS`` (set by
    ``ray job submit``), else a new local Ray on all this machine's cores; ``"auto"`` joins the
    cluster started on this machine with ``ray start``; ``"host:port"`` or
    ``"ray://host:port"`` joins that cluster. ``runtime_env`` is merged into the job's runtime
    environment (e.g. ``{"py_modules": [...]}`` to ship code to cluster nodes). ``warm``:
    False for a process that starts a Ray for others and submits no task itself (workers are
    per job: warming its own would be work for nothing).
    """
    with _init_lock:
        if not ray.is_initialized():
            _init(address, runtime_env)
        if warm:
            _warm_once()


def _init(address: str | None, runtime_env: dict | None) -> None:
    """Start a local Ray, or join the cluster at ``address`` (see :func:`ensure_ray`)."""
    address = resolve_address(address)
    if address is None and (folder := session_folder()):  # a pytest session's shared Ray
        address = request_address(folder)
    env = dict(runtime_env or {})
    env["env_vars"] = {**WORKER_ENV, **env.get("env_vars", {})}
    if address is None:
        if "RAY_AUTH_MODE" not in os.environ:
            _set_auth_mode("token")  # Ray's default for a new local Ray, said explicitly
        ray.init(
            address="local",
            num_cpus=local_cpus(),
            include_dashboard=False,
            runtime_env=env,
            _system_config={"task_oom_retries": TASK_OOM_RETRIES},
        )
        return
    if "RAY_AUTH_MODE" not in os.environ and _token_available():
        # Ray enables token auth by itself only for address="auto"; a cluster started with a
        # token (Ray's default) refuses other drivers after a 20 s generic ConnectionError.
        _set_auth_mode("token")
    start = time.perf_counter()
    try:
        ray.init(address=address, runtime_env=env)
    except ConnectionError as e:
        raise ConnectionError(_join_failure(address, time.perf_counter() - start, e)) from e


def _warm_once() -> None:
    """On a driver's first use of this Ray job: warm every worker slot (see the module's doc)."""
    context = ray.get_runtime_context()
    if context.worker.mode == ray.WORKER_MODE:  # a task that submits tasks (a split case)
        return
    job = context.get_job_id()
    if job not in _warmed_jobs:
        _warmed_jobs.add(job)
        warm_workers()


@ray.remote(num_cpus=1)
def _import(modules: tuple[str, ...]) -> int:
    for module in modules:
        importlib.import_module(module)
    warm_libraries()
    time.sleep(0.1)  # long enough that the tasks spread over every worker slot
    return os.getpid()


def warm_libraries() -> None:
    """The slow first calls of every autodiff library this process has imported
    (:meth:`Engine.warm_up`), made while nothing waits for them: in a worker, not in its first
    task; on the driver, not in the backward pass a check times to plan its chunks."""
    for name in registry.library_engines():
        get_engine(name).warm_up()


def warm_workers(modules: tuple[str, ...] = (), timeout: float = WARM_TIMEOUT) -> float:
    """Have one worker process per CPU of the cluster import ``modules``, distcheck's task code
    and the autodiff libraries this process has imported, all at once; wait for them (up to
    ``timeout`` seconds). Returns the seconds it took."""
    start = time.perf_counter()
    wanted = (*WARM_MODULES, *(m for m in registry.libraries() if m in sys.modules), *modules)
    refs = [_import.remote(wanted) for _ in range(cluster_cpus())]
    warm_libraries()  # the driver too (a check measures a backward pass on it)
    ray.wait(refs, num_returns=len(refs), timeout=timeout)
    return time.perf_counter() - start


def cluster_cpus() -> int:
    """CPUs of the Ray this process is connected to (at least 1)."""
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def cluster_gpus() -> float:
    """GPUs of the Ray this process is connected to (logical ones included: ``--num-gpus``)."""
    return float(ray.cluster_resources().get("GPU", 0))


def _token_available() -> bool:
    if any(os.environ.get(name) for name in _TOKEN_VARIABLES):
        return True
    return os.path.exists(os.path.join(os.path.expanduser("~"), ".ray", "auth_token"))


def _set_auth_mode(mode: str) -> None:
    """Set RAY_AUTH_MODE for this process and the Ray processes it starts. Ray reads it when
    imported: its configuration is reloaded, as Ray itself does when it enables tokens."""
    from ray._raylet import Config

    os.environ["RAY_AUTH_MODE"] = mode
    Config.initialize("")


def _join_failure(address: str, seconds: float, error: Exception) -> str:
    mode = os.environ.get("RAY_AUTH_MODE", "unset (disabled)")
    return (
        f"distcheck could not join the Ray cluster at {address!r} (gave up after {seconds:.0f} s: {error}).\n"
        f"- Is the cluster running and reachable (`ray status --address {address}` on this machine)?\n"
        f"- Token authentication: RAY_AUTH_MODE is {mode}. Clusters started by Ray >= 2.60 use a token "
        "by default and reject drivers that have none, with exactly this kind of timeout. Set "
        "RAY_AUTH_MODE=token and make the cluster's token available: ~/.ray/auth_token, "
        "RAY_AUTH_TOKEN_PATH or RAY_AUTH_TOKEN (`ray get-auth-token` on the head node prints it); "
        "or start the cluster with RAY_AUTH_MODE=disabled on a trusted network."
    )


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
    pickled always runs in-process.
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
    ):
        self.block_bytes = default_block_bytes() if block_bytes is None else block_bytes
        self.address, self.runtime_env, self.gpus = address, runtime_env, gpus
        self.local_below = local_below
        self.max_retries, self.cancel_grace = max_retries, cancel_grace
        self._policy = policy if policy is not None else CostModel()
        self._subject_refs: dict[int, ray.ObjectRef] = {}
        self._placed: dict[int, str] = {}  # where each live subject's check runs
        self._cpus: tuple[float, int] | None = None  # (when asked, CPUs)

    @property
    def workers(self) -> int:
        """CPUs in the cluster (asked at most every few seconds: clusters grow and shrink).
        Before a local Ray is started, the CPUs it will have: planning a check that then runs
        in-process starts no Ray (starting one, and warming its workers, costs seconds of CPU)."""
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
        if isinstance(self._policy, CostModel):
            return replace(
                self._policy,
                workers=self.workers,
                block_bytes=self.block_bytes,
                settled_below=settled_below(self._policy, self.local_below),
            )
        return self._policy

    def place(self, subject: Subject, units: Sequence[Unit]) -> str:
        """Where a check runs: "ray", or in-process: "small" (estimated work under
        ``local_below`` seconds) or "unpicklable" (its subject cannot be sent to workers)."""
        if is_small(subject, units, self.local_below):
            return "small"
        try:
            pickled = dumps_subject(subject)
        except Exception:  # pickling raises whatever the object's __reduce__ raises
            return "unpicklable"
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
        return self._start(box, units, groups)

    def _start(self, box: list[ray.ObjectRef], units: Sequence[Unit], groups: list[list[int]]):
        """Run the check's ``units`` in tasks of ``groups`` (indices into ``units``)."""
        run = _run_units.options(max_retries=self.max_retries, **({"num_gpus": self.gpus} if self.gpus else {}))
        refs = [run.remote(box, [units[k] for k in members]) for members in groups]
        return RayResults(refs, groups, self.cancel_grace, self.block_bytes)

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
