"""Starting or joining Ray, and warming its workers: ``ensure_ray(address)`` initializes Ray
once per process (or reuses a Ray that is already initialized); the first time a driver uses
Ray through it, every worker slot imports what checks need (distcheck's task code, and the
autodiff libraries the driver has imported) all at once, before it returns: a worker that
starts cold would make the first check pay for it.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
import time

import ray

from distcheck.engines import get_engine, registry
from distcheck.executors.ray_settings import local_cpus, new_spill_folder, resolve_address
from distcheck.executors.session_ray import request_address, session_folder

# Environment of every worker this driver starts: one thread per task, whatever the library.
WORKER_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# A task killed by Ray's memory monitor is retried this many times (Ray's default: forever).
TASK_OOM_RETRIES = 2
_TOKEN_VARIABLES = ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
# What a worker imports to be warm: distcheck's side of a task, and the library of every engine
# whose library the driver has imported (they are what deserializing a check's subject imports).
WARM_MODULES = ("distcheck.plan.units", "distcheck.executors.ray_tasks")
WARM_TIMEOUT = 120.0  # seconds a warm-up may take before distcheck goes on without it
_init_lock = threading.Lock()
_warmed_jobs: set[str] = set()


def ensure_ray(address: str | None = None, runtime_env: dict | None = None, *, warm: bool = True) -> None:
    """Initialize Ray in this process unless it already is (an initialized Ray is reused as is).

    ``address``: None means ``$DISTCHECK_RAY_ADDRESS``, else ``$RAY_ADDRESS`` (set by
    ``ray job submit``), else a new local Ray on all this machine's cores; ``"host:port"`` or
    ``"ray://host:port"`` joins that cluster; ``"auto"`` is handed to Ray as it is: the cluster
    ``ray start`` began on this machine, else any Ray running here (another process's
    ``ray.init()`` session included). ``runtime_env`` is merged into the job's runtime
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
            object_spilling_directory=new_spill_folder(),  # removed when distcheck stops this Ray
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


def workers_warm() -> bool:
    """This process's Ray job has had its workers warmed (see :func:`ensure_ray`)."""
    return ray.is_initialized() and ray.get_runtime_context().get_job_id() in _warmed_jobs


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
