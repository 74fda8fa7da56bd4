"""The pytest plugin (entry point ``pytest11``: active wherever distcheck is installed, inert
unless one of its options is given; loading it imports neither torch nor Ray).

    pytest --distcheck-executor ray tests/                     # distcheck.gradcheck calls on a local Ray
    pytest --distcheck-executor ray --distcheck-address 10.0.0.5:6379 tests/
    pytest --distcheck-torch --distcheck-executor ray tests/   # torch.autograd.gradcheck calls too

- ``--distcheck-executor serial|ray`` and ``--distcheck-address ADDR`` set, for the session,
  the environment variables ``DISTCHECK_EXECUTOR`` / ``DISTCHECK_RAY_ADDRESS`` that
  ``distcheck.gradcheck(..., executor=None)`` reads (set by hand they keep working; the options
  win). An address alone means Ray.
- ``--distcheck-torch`` replaces ``torch.autograd.gradcheck`` / ``gradgradcheck`` (the names
  in ``torch.autograd`` and in the module ``torch.autograd.gradcheck``) for the session with
  distcheck's, which have the same signature and verdicts and raise torch's exception types
  (a failed check raises an error that is both torch's ``GradcheckError``, from
  ``torch.autograd.gradcheck``, and ``distcheck.GradcheckError``). They are replaced when
  pytest is configured, before test modules are imported, so ``from torch.autograd import
  gradcheck`` in a test module gets distcheck's; torch's test-suite wrappers
  (``torch.testing._internal.common_utils.gradcheck``) look ``torch.autograd.gradcheck`` up
  when called. Everything is restored at the end.
- On Ray, what test modules define (functions, autograd Functions) is sent to the workers by
  value; other code the checked functions use must be importable on the workers.
- On Ray, a check whose estimated work is under ``--distcheck-local-below`` seconds (default:
  ``distcheck.executors.ray_settings.LOCAL_BELOW``) runs in-process, with no serialisation, and
  so does one whose function or inputs cannot be pickled, and, while no Ray runs, every check
  until what Ray would have saved on them reaches what starting it costs
  (``RayFront.place``); the others are split over the cluster.
  Ray is imported (and a local one started) at the first check that goes there: a session
  whose checks are all small never imports it.
- At the end, one line: how many checks ran through distcheck, how many of them in-process
  (small, unpicklable) and how many on Ray, in how many Ray tasks (units, for the serial
  executor), summed over pytest-xdist workers.

With pytest-xdist (``-n N``) and Ray, all workers share one Ray: the cluster at the address
given, else one local Ray of the controller's (on all the cores: an xdist worker waiting for
its check's tasks uses none), which it starts when the first worker sends a check to Ray
(:mod:`distcheck.executors.session_ray`: a session whose checks all run in-process starts no
Ray) and stops at the end; every worker joins it at its first check that goes there. Every
xdist worker computes on one intra-op thread; one warning line when the xdist workers
outnumber the cores.
"""

from __future__ import annotations

import functools
import inspect
import os
import time

import pytest

EXECUTORS = ("serial", "ray")
EXECUTOR_VARIABLE = "DISTCHECK_EXECUTOR"
ADDRESS_VARIABLE = "DISTCHECK_RAY_ADDRESS"  # as distcheck.executors.ray_settings (not imported at load)
_PLUGIN = "distcheck-session"
LOCAL_BELOW_VARIABLE = "DISTCHECK_LOCAL_BELOW"  # as distcheck.executors.ray_settings
_OUTPUT_KEY = "distcheck_counts"  # what an xdist worker sends its controller
_INPUT_KEY = "distcheck_ray_address"  # the session's Ray, from the controller to its workers
_CPUS_KEY = "distcheck_ray_cpus"  # and its CPUs: a worker joins it only for a check it sends there
_SESSION_KEY = "distcheck_ray_session"  # or the folder where a worker asks the controller to start it
SESSION_VARIABLE = "DISTCHECK_RAY_SESSION"  # as distcheck.executors.session_ray
CPUS_VARIABLE = "DISTCHECK_RAY_CPUS"  # as distcheck.executors.ray_settings
_COUNTS = ("checks", "small", "startup", "unpicklable", "on_ray", "tasks", "local_seconds", "ray_seconds")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("distcheck", "distcheck: gradient checks on Ray")
    group.addoption(
        "--distcheck-executor",
        choices=EXECUTORS,
        help=f"where distcheck.gradcheck calls run (sets ${EXECUTOR_VARIABLE} for the session)",
    )
    group.addoption(
        "--distcheck-address",
        metavar="ADDR",
        help=f"the Ray cluster of those checks: 'auto', host:port or ray://host:port (sets ${ADDRESS_VARIABLE}; "
        "implies --distcheck-executor ray; with pytest-xdist, every worker joins it)",
    )
    group.addoption(
        "--distcheck-local-below",
        type=float,
        metavar="SECONDS",
        help=f"on Ray, checks of less estimated work run in-process (sets ${LOCAL_BELOW_VARIABLE}; 0: every "
        "picklable check on Ray)",
    )
    group.addoption(
        "--distcheck-torch",
        action="store_true",
        help="run torch.autograd.gradcheck / gradgradcheck calls through distcheck (same signature, verdicts "
        "and exception types), on that executor",
    )


def pytest_configure(config: pytest.Config) -> None:
    executor = config.getoption("distcheck_executor")
    address = config.getoption("distcheck_address")
    patch_torch = config.getoption("distcheck_torch")
    if not (executor or address or patch_torch):
        return  # inert
    if address and executor == "serial":
        raise pytest.UsageError("--distcheck-address needs --distcheck-executor ray (or no --distcheck-executor)")
    session = DistcheckSession(executor or ("ray" if address else None), address, patch_torch)
    session.local_below = config.getoption("distcheck_local_below")
    config.pluginmanager.register(session, _PLUGIN)
    session.start(config)


class DistcheckSession:
    """What the plugin changed for the session (to restore it), and the counts."""

    def __init__(self, executor: str | None, address: str | None, patch_torch: bool):
        self.executor, self.address, self.patch_torch = executor, address, patch_torch
        self.saved_env: dict[str, str | None] = {}
        self.patched: list[tuple[object, str, object]] = []  # (owner, attribute, original)
        self.local_below: float | None = None
        self.counts = dict.fromkeys(_COUNTS, 0)
        self.where: str | None = None  # where the check being timed ran (its first submission decides)
        self.xdist_workers: list[dict[str, float]] = []
        self.cpus: int | None = None  # of the local Ray this process starts for its xdist workers on request
        self.session_ray = None  # the controller's: the local Ray it starts when a worker asks
        self.started_ray = False  # this process started the session's local Ray
        self.threads: int | None = None  # torch's intra-op threads before the session

    def _setenv(self, variable: str, value: str) -> None:
        self.saved_env.setdefault(variable, os.environ.get(variable))
        os.environ[variable] = value

    def start(self, config: pytest.Config) -> None:
        for variable, value in ((EXECUTOR_VARIABLE, self.executor), (ADDRESS_VARIABLE, self.address)):
            if value:
                self._setenv(variable, value)
        if self.local_below is not None:
            self._setenv(LOCAL_BELOW_VARIABLE, repr(self.local_below))
        worker_input = getattr(config, "workerinput", None)
        if worker_input is not None:  # an xdist worker: the controller's Ray, one intra-op thread
            if worker_input.get(_INPUT_KEY):
                self._setenv(ADDRESS_VARIABLE, worker_input[_INPUT_KEY])
            if worker_input.get(_SESSION_KEY):
                self._setenv(SESSION_VARIABLE, worker_input[_SESSION_KEY])
            if worker_input.get(_CPUS_KEY):
                self._setenv(CPUS_VARIABLE, str(worker_input[_CPUS_KEY]))
            import torch

            self.threads = torch.get_num_threads()
            torch.set_num_threads(1)
        if _is_xdist_controller(config):  # runs no test: neither counts nor imports torch (seconds of CPU)
            if self._executor() == "ray":
                self._start_session_ray(config)
            return
        self._count_checks()
        if self.patch_torch:
            self._patch_torch()

    def _executor(self) -> str:
        return self.executor or os.environ.get(EXECUTOR_VARIABLE, "").strip().lower() or "serial"

    def _start_session_ray(self, config: pytest.Config) -> None:
        """The xdist controller: one Ray for every worker (a local one unless an address is
        known), and one warning line if the xdist workers outnumber the cores."""
        from distcheck.executors.ray_settings import local_cpus

        workers, cores = _xdist_workers(config), local_cpus()
        if workers > cores:
            config.issue_config_time_warning(
                pytest.PytestConfigWarning(
                    f"distcheck: {workers} xdist workers on {cores} cores: the cores are oversubscribed "
                    f"(-n {cores} or fewer keeps one process per core)"
                ),
                stacklevel=2,
            )
        if _address_known():
            return
        from distcheck.executors.session_ray import SessionRay

        self.session_ray = SessionRay(self._start_local_ray, self._shutdown_ray)
        self.cpus = cores  # what ensure_ray's local Ray will have

    def _start_local_ray(self) -> str:
        """The session's local Ray, started (in the session Ray's thread) when the first xdist
        worker sends a check there."""
        import ray

        from distcheck.executors.ray_executor import ensure_ray

        self.started_ray = not ray.is_initialized()
        ensure_ray(warm=False)  # each worker's job warms the worker processes it uses
        return ray.get_runtime_context().gcs_address

    def _shutdown_ray(self) -> None:
        if self.started_ray:  # not a Ray this process had before the session
            import ray

            ray.shutdown()
            self.started_ray = False

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:
        """xdist: every worker joins the session's Ray (when a check of its goes there)."""
        if self.address:
            node.workerinput[_INPUT_KEY] = self.address
        if self.session_ray is not None:
            node.workerinput[_SESSION_KEY] = self.session_ray.folder
        if self.cpus:
            node.workerinput[_CPUS_KEY] = self.cpus

    def _set(self, owner: object, attribute: str, value: object) -> None:
        self.patched.append((owner, attribute, getattr(owner, attribute)))
        setattr(owner, attribute, value)

    def _count_checks(self) -> None:
        """Every distcheck check resolves its executor once (``distcheck.api.resolve``): wrap
        what it returns to count the check and its tasks."""
        import distcheck.api

        resolve = distcheck.api.resolve

        def counted(executor=None):
            self.counts["checks"] += 1
            return _CountingExecutor(resolve(executor), self)

        self._set(distcheck.api, "resolve", counted)

    def _patch_torch(self) -> None:
        import importlib

        import torch.autograd

        import distcheck

        module = importlib.import_module("torch.autograd.gradcheck")  # the module, not the function
        for owner in (torch.autograd, module):
            self._set(owner, "gradcheck", _in_place_of(owner.gradcheck, self._timed(distcheck.gradcheck)))
            self._set(owner, "gradgradcheck", _in_place_of(owner.gradgradcheck, self._timed(distcheck.gradgradcheck)))

    def _timed(self, check):
        """``check``, its wall time added to the time of the checks that ran where it ran (on Ray
        if its check went there, else in-process), for the session's line."""

        @functools.wraps(check)
        def timed(*args, **kwargs):
            self.where = None
            start = time.perf_counter()
            try:
                return check(*args, **kwargs)
            finally:
                key = "ray_seconds" if self.where == "ray" else "local_seconds"
                self.counts[key] += time.perf_counter() - start

        return timed

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """On Ray, functions and autograd Functions defined in test modules travel by value:
        the workers cannot import test modules (not on a cluster's nodes; not on a local Ray's
        path either if it started before collection)."""
        if self._executor() != "ray":
            return
        from distcheck.executors.ray_settings import pickle_by_value

        for module in {item.module for item in session.items if getattr(item, "module", None) is not None}:
            pickle_by_value(module)  # registered with Ray's pickler at the first check sent there

    def restore(self) -> None:
        for owner, attribute, original in reversed(self.patched):
            setattr(owner, attribute, original)
        self.patched.clear()
        for variable, value in self.saved_env.items():
            if value is None:
                os.environ.pop(variable, None)
            else:
                os.environ[variable] = value
        self.saved_env.clear()
        if self.threads is not None:
            import torch

            torch.set_num_threads(self.threads)
            self.threads = None
        if self.session_ray is not None:  # the controller's local Ray for the session, if started
            self.session_ray.stop()
            self.session_ray = None

    def summary(self) -> str:
        total = {k: self.counts[k] + sum(w.get(k, 0) for w in self.xdist_workers) for k in _COUNTS}
        where = self._executor()
        workers = f" over {len(self.xdist_workers)} xdist workers" if self.xdist_workers else ""
        line = f"distcheck: {total['checks']} gradient check(s) ran through distcheck ({where}){workers}"
        if where != "ray":
            return f"{line}, in {total['tasks']} task(s); their time: {total['local_seconds']:.1f} s"
        local = total["small"] + total["startup"] + total["unpicklable"]  # the rest stopped before running
        below = os.environ.get(LOCAL_BELOW_VARIABLE) or _default_local_below()
        startup = f"{total['startup']} before starting Ray paid off, " if total["startup"] else ""
        return (
            f"{line}: {local} in-process ({total['small']} under {below} s of estimated work, {startup}"
            f"{total['unpicklable']} unpicklable), {total['on_ray']} on Ray in {total['tasks']} task(s); "
            f"their time: {total['local_seconds']:.1f} s in-process, {total['ray_seconds']:.1f} s on Ray"
        )

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None:  # an xdist worker: its controller sums and reports
            workeroutput[_OUTPUT_KEY] = dict(self.counts)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        counts = getattr(node, "workeroutput", {}).get(_OUTPUT_KEY)
        if counts is not None:
            self.xdist_workers.append(dict(counts))

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not hasattr(terminalreporter.config, "workerinput"):
            terminalreporter.write_line(self.summary())

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.restore()


def _in_place_of(original, replacement):
    """``replacement`` under ``original``'s name, docstring and signature (distcheck's checks
    take every keyword of torch's, with the same defaults)."""

    @functools.wraps(original)
    def check(*args, **kwargs):
        return replacement(*args, **kwargs)

    check.__signature__ = inspect.signature(original)
    check.distcheck = True  # what the plugin put there
    return check


class _CountingExecutor:
    """The executor of one check, counting where the check ran (its first submission decides)
    and the tasks it was given (units, for an in-process executor)."""

    def __init__(self, inner, session: DistcheckSession):
        self.inner, self.session = inner, session
        self.name = inner.name
        self.placed = False

    @property
    def workers(self) -> int:
        return self.inner.workers

    @property
    def policy(self):
        return self.inner.policy

    def submit(self, subject, units):
        results = self.inner.submit(subject, units)
        counts = self.session.counts
        where = getattr(results, "placed", "ray" if self.name == "ray" else None)
        if not self.placed and where in ("ray", "small", "startup", "unpicklable"):
            counts["on_ray" if where == "ray" else where] += 1
            self.session.where = where
        self.placed = True
        counts["tasks"] += getattr(results, "tasks", len(units))
        return results


def _is_xdist_controller(config: pytest.Config) -> bool:
    return bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")


def _xdist_workers(config: pytest.Config) -> int:
    workers = getattr(config.option, "numprocesses", None)
    if isinstance(workers, int):
        return workers
    from distcheck.executors.ray_settings import local_cpus

    return local_cpus()  # -n auto / logical


def _default_local_below() -> str:
    from distcheck.executors.ray_settings import LOCAL_BELOW

    return repr(LOCAL_BELOW)


def _address_known() -> bool:
    return any(os.environ.get(name, "").strip() for name in (ADDRESS_VARIABLE, "RAY_ADDRESS"))
