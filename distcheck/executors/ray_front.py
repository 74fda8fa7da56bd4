"""``executor="ray"`` before Ray: :class:`RayFront`, the executor behind ``executor="ray"``,
plans a check for the CPUs the cluster will have, runs it in-process when its estimated work is
under the threshold (:data:`~distcheck.executors.ray_settings.LOCAL_BELOW`), and imports Ray
(and starts or joins it, and warms its workers) only for the first check that goes there; from
then on it hands every other check to its
:class:`~distcheck.executors.ray_executor.RayExecutor`. A test session whose checks are all
small (the pytest plugin's fast-mode files) never pays Ray's import and start; a Ray that runs
already (the user's ``ray.init()``) without distcheck's warm workers is a start too, of their
warm-up's cost.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from distcheck.executors.ray_settings import (
    ADDRESS_VARIABLE,
    LOCAL_BELOW,
    MAX_JACOBIAN_MB_VARIABLE,
    RAY_START_SECONDS,
    RAY_WARM_SECONDS,
    LocalResults,
    default_block_bytes,
    estimated_seconds,
    local_below,
    local_cpus,
    planned_workers,
    ray_connected,
    ray_saving,
    settled_below,
)
from distcheck.plan.cost_model import CostModel
from distcheck.plan.subject import Subject
from distcheck.plan.units import Unit

if TYPE_CHECKING:
    from distcheck.executors.ray_executor import RayExecutor, RayResults

_lock = threading.Lock()


class RayFront:
    """The executor behind ``executor="ray"``: a check of estimated work under ``local_below``
    seconds runs in-process without Ray, and so do, while none runs, the checks before starting
    Ray pays off (see :meth:`place`); the others go to a
    :class:`~distcheck.executors.ray_executor.RayExecutor` at ``address``, made (and Ray
    imported, started or joined) when the first of them comes, with the Jacobian budget
    ``max_jacobian_mb`` (None: its default). ``start``: what starting or joining Ray and
    warming its workers costs; ``warm``: what warming them costs on a Ray this process already
    runs. Every submission of a check goes where its first went."""

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        local_below: float = LOCAL_BELOW,
        start: float = RAY_START_SECONDS,
        max_jacobian_mb: float | None = None,
        warm: float = RAY_WARM_SECONDS,
    ):
        self.address, self.local_below, self.start, self.warm = address, local_below, start, warm
        self.max_jacobian_mb = max_jacobian_mb  # the Ray executor's Jacobian budget (None: its default)
        self.forgone = 0.0  # seconds a running Ray would have saved on the checks kept here for want of it
        self._ray: RayExecutor | None = None
        self._placed: dict[int, str | None] = {}  # per live subject: where it runs here (None: Ray)

    def executor(self) -> RayExecutor:
        """The Ray executor (imports Ray)."""
        with _lock:
            if self._ray is None:
                from distcheck.executors.ray_executor import RayExecutor

                # small checks are decided here
                self._ray = RayExecutor(self.address, local_below=0.0, max_jacobian_mb=self.max_jacobian_mb)
            return self._ray

    def _cluster_cpus(self) -> int | None:
        """The CPUs of the Ray checks would go to, as far as known without joining it: a
        running Ray's (asked of it), else :func:`planned_workers` (None: only joining tells)."""
        if ray_connected():
            from distcheck.executors.ray_start import cluster_cpus

            return cluster_cpus()
        return planned_workers(self.address)

    def _planned(self) -> int | None:
        """The CPUs checks are planned for before this front's Ray executor is made (None: ask
        the executor). A cluster whose size only joining tells is planned for this machine's
        cores while checks may still stay here: joining to learn the size would cost a check
        that stays here the join and the workers' warm-up; a check planned for fewer CPUs than
        its cluster has runs there in fewer, longer tasks."""
        if self._ray is not None:
            return None
        cpus = self._cluster_cpus()
        return local_cpus() if cpus is None and self.local_below > 0 else cpus

    def _start_cost(self) -> float:
        """What making the Ray executor costs now: ``start`` while Ray does not run here,
        ``warm`` while it runs without warm workers for this process's job, else nothing."""
        if not ray_connected():
            return self.start
        from distcheck.executors.ray_start import workers_warm

        return 0.0 if workers_warm() else self.warm

    @property
    def workers(self) -> int:
        planned = self._planned()
        return planned if planned is not None else self.executor().workers

    @property
    def policy(self) -> CostModel:
        planned = self._planned()  # once: on a running Ray, asking it is a call to its head
        if planned is None:
            return self.executor().policy
        model = CostModel()
        return replace(
            model,
            workers=planned,
            block_bytes=default_block_bytes(),
            settled_below=settled_below(model, self.local_below),
        )

    def place(self, subject: Subject, units: Sequence[Unit]) -> str | None:
        """In-process: "small" (estimated work under ``local_below``), or "startup": this front
        has no Ray executor yet, and what one would save on the checks kept here for want of
        it, this one included (:func:`ray_saving`), is still under what making it costs
        (``start``; ``warm`` on a Ray that runs already, whose workers it must warm). Once that
        sum reaches the cost, the executor is made for this check: as one rents skis until the
        rent paid would buy them, never paying more than twice the best choice made knowing the
        checks to come (a single check whose saving exceeds the cost goes at once). None: to
        the Ray executor. ``local_below`` 0 keeps no check here (every one goes to Ray)."""
        if self.local_below <= 0:
            return None
        work = estimated_seconds(subject, units)
        if work is None:
            return None
        if work < self.local_below:
            return "small"
        if self._ray is None:
            cost = self._start_cost()
            saving = ray_saving(work, self._cluster_cpus())
            with _lock:
                if self.forgone + saving < cost:
                    self.forgone += saving
                    return "startup"
        return None

    def submit(self, subject: Subject, units: Sequence[Unit]) -> LocalResults | RayResults:
        key = id(subject)
        if key not in self._placed:
            self._placed[key] = self.place(subject, units)
            weakref.finalize(subject, self._placed.pop, key, None)
        where = self._placed[key]
        if where is not None:
            return LocalResults(subject, units, where)
        return self.executor().submit(subject, units)

    def __repr__(self) -> str:
        return f"RayFront(address={self.address!r}, local_below={self.local_below!r})"


_defaults: dict[tuple[str | None, float, str], RayFront] = {}


def default_ray_executor() -> RayFront:
    """The executor behind ``executor="ray"``: one per process (per ``$DISTCHECK_RAY_ADDRESS``,
    threshold and ``$DISTCHECK_MAX_JACOBIAN_MB``)."""
    address = os.environ.get(ADDRESS_VARIABLE, "").strip() or None
    key = (address, local_below(), os.environ.get(MAX_JACOBIAN_MB_VARIABLE, "").strip())
    with _lock:
        if key not in _defaults:
            _defaults[key] = RayFront(address, key[1])
        return _defaults[key]
