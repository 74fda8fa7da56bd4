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
- At the end, one line: how many checks ran through distcheck, in how many executor tasks
  (units run in-process for the serial executor), summed over pytest-xdist workers.

With pytest-xdist (``-n N``) every worker process runs its own checks: give an address (a
cluster from ``ray start --head``) so that all of them share one Ray; without one, each worker
would start a local Ray of its own on the same cores.
"""

from __future__ import annotations

import functools
import inspect
import os

import pytest

EXECUTORS = ("serial", "ray")
EXECUTOR_VARIABLE = "DISTCHECK_EXECUTOR"
ADDRESS_VARIABLE = "DISTCHECK_RAY_ADDRESS"  # as distcheck.executors.ray_executor (not imported here: no Ray)
_PLUGIN = "distcheck-session"
_OUTPUT_KEY = "distcheck_counts"  # what an xdist worker sends its controller


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
    config.pluginmanager.register(session, _PLUGIN)
    session.start(config)


class DistcheckSession:
    """What the plugin changed for the session (to restore it), and the counts."""

    def __init__(self, executor: str | None, address: str | None, patch_torch: bool):
        self.executor, self.address, self.patch_torch = executor, address, patch_torch
        self.saved_env: dict[str, str | None] = {}
        self.patched: list[tuple[object, str, object]] = []  # (owner, attribute, original)
        self.checks = self.tasks = 0
        self.xdist_workers: list[tuple[int, int]] = []

    def start(self, config: pytest.Config) -> None:
        for variable, value in ((EXECUTOR_VARIABLE, self.executor), (ADDRESS_VARIABLE, self.address)):
            if value:
                self.saved_env[variable] = os.environ.get(variable)
                os.environ[variable] = value
        self._count_checks()
        if self.patch_torch:
            self._patch_torch()
        if _is_xdist_controller(config) and self.executor == "ray" and not _address_known():
            config.issue_config_time_warning(
                pytest.PytestConfigWarning(
                    "distcheck: with pytest-xdist and no --distcheck-address, every xdist worker starts a local Ray "
                    "of its own; give a cluster's address (`ray start --head`) to share one"
                ),
                stacklevel=2,
            )

    def _set(self, owner: object, attribute: str, value: object) -> None:
        self.patched.append((owner, attribute, getattr(owner, attribute)))
        setattr(owner, attribute, value)

    def _count_checks(self) -> None:
        """Every distcheck check resolves its executor once (``distcheck.api.resolve``): wrap
        what it returns to count the check and its tasks."""
        import distcheck.api

        resolve = distcheck.api.resolve

        def counted(executor=None):
            self.checks += 1
            return _CountingExecutor(resolve(executor), self)

        self._set(distcheck.api, "resolve", counted)

    def _patch_torch(self) -> None:
        import importlib

        import torch.autograd

        import distcheck

        module = importlib.import_module("torch.autograd.gradcheck")  # the module, not the function
        for owner in (torch.autograd, module):
            self._set(owner, "gradcheck", _in_place_of(owner.gradcheck, distcheck.gradcheck))
            self._set(owner, "gradgradcheck", _in_place_of(owner.gradgradcheck, distcheck.gradgradcheck))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """On Ray, functions and autograd Functions defined in test modules travel by value:
        the workers cannot import test modules (not on a cluster's nodes; not on a local Ray's
        path either if it started before collection)."""
        if (self.executor or os.environ.get(EXECUTOR_VARIABLE, "").strip().lower()) != "ray":
            return
        from ray import cloudpickle

        for module in {item.module for item in session.items if getattr(item, "module", None) is not None}:
            cloudpickle.register_pickle_by_value(module)

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

    def summary(self) -> str:
        checks = self.checks + sum(c for c, _ in self.xdist_workers)
        tasks = self.tasks + sum(t for _, t in self.xdist_workers)
        where = self.executor or os.environ.get(EXECUTOR_VARIABLE) or "serial"
        workers = f" over {len(self.xdist_workers)} xdist workers" if self.xdist_workers else ""
        return f"distcheck: {checks} gradient check(s) ran through distcheck ({where}){workers}, in {tasks} task(s)"

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None:  # an xdist worker: its controller sums and reports
            workeroutput[_OUTPUT_KEY] = (self.checks, self.tasks)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        counts = getattr(node, "workeroutput", {}).get(_OUTPUT_KEY)
        if counts is not None:
            self.xdist_workers.append(tuple(counts))

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
    """An executor that counts the tasks it is given (units, for an in-process executor)."""

    def __init__(self, inner, session: DistcheckSession):
        self.inner, self.session = inner, session
        self.name = inner.name

    @property
    def workers(self) -> int:
        return self.inner.workers

    @property
    def policy(self):
        return self.inner.policy

    def submit(self, subject, units):
        results = self.inner.submit(subject, units)
        self.session.tasks += getattr(results, "tasks", len(units))
        return results


def _is_xdist_controller(config: pytest.Config) -> bool:
    return bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")


def _address_known() -> bool:
    return any(os.environ.get(name, "").strip() for name in (ADDRESS_VARIABLE, "RAY_ADDRESS"))
