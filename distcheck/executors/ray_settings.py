"""The Ray executor's settings and the decisions a process makes before it has Ray: nothing
here imports Ray (importing it costs a process more than half a second of CPU; the pytest
plugin and ``executor="ray"`` decide without it where a small check runs).

The environment variables, the block budget, the Jacobian budget, the CPUs of a Ray not
started yet, whether a check is small enough to run in-process, the spill folder of a local
Ray and its removal, and the test modules whose code travels to Ray by value (registered with
Ray's pickler by the Ray executor, at the first check it pickles).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Sequence
from types import ModuleType

from distcheck.executors.serial import SerialResults

# the block budget, defined with the plan (batches are sized by it), read here by the executors' users
from distcheck.plan.block_budget import BLOCK_MB_VARIABLE as BLOCK_MB_VARIABLE
from distcheck.plan.block_budget import DEFAULT_BLOCK_BYTES as DEFAULT_BLOCK_BYTES
from distcheck.plan.block_budget import default_block_bytes as default_block_bytes
from distcheck.plan.cost_model import CostModel, work_seconds
from distcheck.plan.subject import Subject
from distcheck.plan.units import Unit
from distcheck.plan.units.numerical import NumericalColumns
from distcheck.plan.units.slots import slots_bytes

ADDRESS_VARIABLE = "DISTCHECK_RAY_ADDRESS"
# The CPUs of the cluster at $DISTCHECK_RAY_ADDRESS, when known (the pytest plugin's xdist
# workers, given the session's Ray): a check is planned without joining it.
CPUS_VARIABLE = "DISTCHECK_RAY_CPUS"
# Seconds of estimated work under which executor="ray" runs a check in-process (see docs/plugin.md
# for the measurement); $DISTCHECK_LOCAL_BELOW overrides it (0: every picklable check on Ray).
LOCAL_BELOW = 1.0
LOCAL_BELOW_VARIABLE = "DISTCHECK_LOCAL_BELOW"
# Seconds that starting (or joining) Ray and warming its workers costs a process before its
# first task runs (a lower bound of what docs/plugin.md measures): while no Ray runs, checks stay
# in-process until what Ray would have saved on them, the current one included, reaches it
# (see RayFront.place and ray_saving).
RAY_START_SECONDS = 5.0
# Seconds that warming the workers of a Ray that already runs (the user's own ray.init(), a
# cluster joined before) costs before the first task runs: every worker imports the autodiff
# library (a lower bound of the warm-up docs/benchmarks.md measures); checks stay in-process
# meanwhile in the same way.
RAY_WARM_SECONDS = 2.0
# A check's Jacobians on Ray live in the object store, spilled to disk when it is full: a
# check whose numerical and analytical Jacobians need more than this budget is refused before
# anything runs ($DISTCHECK_MAX_JACOBIAN_MB, else this share of the machine's RAM, as the
# command line's --max-jacobian-mb).
MAX_JACOBIAN_MB_VARIABLE = "DISTCHECK_MAX_JACOBIAN_MB"
RAM_FRACTION = 0.25

_lock = threading.Lock()
_by_value: list[ModuleType] = []  # modules whose functions travel to Ray by value, not yet registered


def default_max_jacobian_bytes() -> float:
    """The Jacobian budget of a check on Ray: ``$DISTCHECK_MAX_JACOBIAN_MB`` megabytes, else a
    quarter of this machine's RAM."""
    text = os.environ.get(MAX_JACOBIAN_MB_VARIABLE, "").strip()
    if text:
        return float(text) * 2**20
    return RAM_FRACTION * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


class JacobianBudgetError(MemoryError):
    """A check's Jacobians would take more than the Ray executor's budget: refused before any
    of its work runs."""


def jacobian_bytes(units: Sequence[Unit]) -> int:
    """Bytes of a slow-mode check's numerical and analytical Jacobians: its finite-difference
    columns' blocks, twice (the analytical Jacobian has the same shape). 0 in fast mode."""
    return 2 * sum(u.size * slots_bytes(u.outputs) for u in units if isinstance(u, NumericalColumns))


def check_jacobian_budget(units: Sequence[Unit], max_bytes: float) -> None:
    """JacobianBudgetError if the check of ``units`` needs more than ``max_bytes``."""
    needed = jacobian_bytes(units)
    if needed > max_bytes:
        raise JacobianBudgetError(
            f"this check's numerical and analytical Jacobians would take {_mb(needed)}, over the Ray "
            f"executor's budget of {_mb(max_bytes)} (on Ray they are held in the object store, and "
            "spilled to disk when it is full); raise it with RayExecutor(max_jacobian_mb=M) or "
            f"${MAX_JACOBIAN_MB_VARIABLE}, or check in fast mode (fast_mode=True), which needs no whole Jacobian"
        )


def _mb(count: float) -> str:
    mb = count / 2**20
    return f"{mb:,.0f} MB" if mb >= 10 else f"{mb:.3g} MB"


def local_cpus() -> int:
    """The cores this process may run on (its affinity mask, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def local_below() -> float:
    """``executor="ray"``'s threshold: ``$DISTCHECK_LOCAL_BELOW`` seconds, else :data:`LOCAL_BELOW`."""
    value = os.environ.get(LOCAL_BELOW_VARIABLE, "").strip()
    return float(value) if value else LOCAL_BELOW


def resolve_address(address: str | None) -> str | None:
    """The cluster address to join, or None to start a local Ray: ``address``, else
    ``$DISTCHECK_RAY_ADDRESS``, else ``$RAY_ADDRESS`` (see ``ensure_ray``)."""
    if address is None:
        address = os.environ.get(ADDRESS_VARIABLE, "").strip() or os.environ.get("RAY_ADDRESS", "").strip()
    return None if address in (None, "", "local") else address


def ray_connected() -> bool:
    """This process has initialized Ray (never true while Ray is not imported)."""
    ray = sys.modules.get("ray")
    return ray is not None and hasattr(ray, "is_initialized") and ray.is_initialized()


def planned_workers(address: str | None) -> int | None:
    """The CPUs a check is planned for while this process has no Ray: a local Ray's (this
    process's cores), or those of the cluster at ``$DISTCHECK_RAY_ADDRESS`` when
    ``$DISTCHECK_RAY_CPUS`` gives them; None when only joining the cluster can tell."""
    if not resolve_address(address):
        return local_cpus()
    known = os.environ.get(CPUS_VARIABLE, "").strip()
    if known and resolve_address(address) == resolve_address(None):  # that cluster's
        return int(known)
    return None


def estimated_seconds(subject: Subject, units: Sequence[Unit]) -> float | None:
    """The check's estimated work (the cost model's timings of its evaluations and backward
    passes); None when the plan measured no costs."""
    if subject.costs is None:
        return None
    return work_seconds(units, subject.costs)


def is_small(subject: Subject, units: Sequence[Unit], threshold: float) -> bool:
    """The check's estimated work is under ``threshold`` seconds: a Ray round trip and the
    workers' parallelism cannot win it back. False when the plan measured no costs, or
    ``threshold`` is 0."""
    if threshold <= 0:
        return False
    work = estimated_seconds(subject, units)
    return work is not None and work < threshold


def settled_below(model: CostModel, local_below: float) -> float:
    """The work under which one timing of each call plans a check as well as the best of three
    (:attr:`CostModel.settled_below`): under ``min_task`` it is one task whatever the timings,
    and under ``local_below`` it runs in-process; the best timings are no longer than the
    first, so they could only confirm both."""
    return min(model.min_task, local_below) if local_below > 0 else model.min_task


def ray_saving(work: float, workers: int | None) -> float:
    """Seconds a running Ray of ``workers`` CPUs would save on a check of estimated work
    ``work`` run in-process: it ends it after ``W / P`` instead of ``W``, a saving of
    ``W - W / P`` (None: not known before joining it, taken as many CPUs: ``W``; one CPU:
    nothing). One check alone pays back a start of ``S`` seconds when its saving exceeds it,
    i.e. above ``W = S * P / (P - 1)``: 10 s on 2 CPUs with ``S`` = 5 s."""
    if workers is None:
        return work
    return 0.0 if workers <= 1 else work * (workers - 1) / workers


_spill_folders: list[str] = []


def new_spill_folder() -> str:
    """A new folder (under the temporary folder, ``$TMPDIR``) for the objects a local Ray that
    distcheck starts spills to disk; removed by :func:`stop_ray`, called at exit too (Ray
    itself leaves its spilled objects behind when it stops)."""
    with _lock:
        if not _spill_folders:
            atexit.register(stop_ray)  # after Ray's own exit handler was registered: runs before it
        folder = tempfile.mkdtemp(prefix="distcheck-ray-spill-")
        _spill_folders.append(folder)
        return folder


def stop_ray() -> None:
    """Stop this process's Ray, if it has one (a local Ray ends; a cluster it joined goes on),
    and remove the spill folders of the local Rays distcheck started here."""
    ray = sys.modules.get("ray")
    if ray is not None and hasattr(ray, "is_initialized") and ray.is_initialized():
        ray.shutdown()
    with _lock:
        while _spill_folders:
            shutil.rmtree(_spill_folders.pop(), ignore_errors=True)


def pickle_by_value(module: ModuleType) -> None:
    """Send ``module``'s functions and classes to Ray by value (a test module, which the
    workers cannot import), from the first check that goes to Ray."""
    with _lock:
        _by_value.append(module)


def take_by_value() -> list[ModuleType]:
    """The modules given to :func:`pickle_by_value` since the last call (the Ray executor
    registers them with its pickler before it pickles a check)."""
    with _lock:
        taken = list(_by_value)
        _by_value.clear()
    return taken


class LocalResults(SerialResults):
    """Results of a check the Ray executor placed in this process: ``placed`` is "small",
    "startup" (before starting Ray paid off) or "unpicklable"; no Ray task."""

    tasks = 0

    def __init__(self, subject: Subject, units: Sequence[Unit], where: str):
        super().__init__(subject, units, 1)
        self.placed = where
