"""The work of a Ray dispatch and who holds it.

:class:`Enumeration` pulls the suite's groups (and cases listed on the driver) in a background
thread — all of them first, to sort the groups heaviest first, when the policy weighs them.

:class:`WorkQueue` holds the work; on Ray it lives in an actor, from which every runner takes
its next item (so the driver is not in the path of each task). Its
:class:`~distcheck.runner.policy.WorkPolicy` decides the order of the work and its pieces (the
default: :mod:`.default_policy`); the queue knows which runner holds which item, so that the
work of a runner that dies or is stopped can be given out again, and when everything is done.
"""

from __future__ import annotations

import dataclasses
import itertools
import queue
import threading
from collections.abc import Callable, Iterator

from distcheck.runner.policy import Item, WorkPolicy
from distcheck.suites.base import CaseInfo, GroupInfo

_END = object()
WAIT = "wait"  # WorkQueue.take: nothing now, ask again (other runners may still add work)


class Enumeration:
    """Pulls ``items`` (groups, and cases listed already) in a daemon thread; :meth:`take` hands
    over what has arrived. ``group_weight``: if given, groups come heaviest first, once
    enumeration is complete (it is cheap: metadata only)."""

    def __init__(self, items: Iterator[GroupInfo | CaseInfo], group_weight: Callable[[GroupInfo], float] | None = None):
        self._arrivals: queue.Queue = queue.Queue()
        self._over = False
        self._thread = threading.Thread(
            target=self._produce, args=(items, group_weight), name="distcheck-enumeration", daemon=True
        )
        self._thread.start()

    def _produce(self, items: Iterator[GroupInfo | CaseInfo], group_weight) -> None:
        try:
            if group_weight is None:
                for item in items:
                    self._arrivals.put(item)
            else:
                held = list(items)
                groups = sorted((i for i in held if isinstance(i, GroupInfo)), key=group_weight, reverse=True)
                for item in [*groups, *(i for i in held if not isinstance(i, GroupInfo))]:
                    self._arrivals.put(item)
            self._arrivals.put(_END)
        except BaseException as e:  # handed to the dispatching thread, which raises it
            self._arrivals.put(e)

    @property
    def over(self) -> bool:
        """Everything enumerated has been taken."""
        return self._over

    def take(self, wait: float = 0.0) -> list[GroupInfo | CaseInfo]:
        """What has arrived (waiting up to ``wait`` seconds for a first item)."""
        taken: list[GroupInfo | CaseInfo] = []
        while not self._over:
            try:
                item = self._arrivals.get(timeout=wait) if wait > 0 and not taken else self._arrivals.get_nowait()
            except queue.Empty:
                break
            if item is _END:
                self._over = True
            elif isinstance(item, BaseException):
                self._over = True
                raise item
            else:
                taken.append(item)
        return taken


class WorkQueue:
    """The work of a dispatch, in the order its ``policy`` hands it out (see the module's doc)."""

    def __init__(self, policy: WorkPolicy):
        self._policy = policy
        self._ids = itertools.count()
        self._held: dict[int, tuple[int, Item]] = {}  # item id -> (runner, item)
        self._runners: set[int] = set()  # runners taking work
        self._taken: dict[int, list[Item]] = {}  # per runner, the items it took, in order
        self._closed = self._paused = False

    def put(self, work: list[GroupInfo | CaseInfo]) -> None:
        """Groups to list, and runnable listed cases."""
        self._policy.put(work)

    def resubmit(self, batches: list[tuple[list[CaseInfo], bool]]) -> None:
        """Batches of cases ``(cases, careful)`` given back, to hand out again."""
        self._policy.resubmit(batches)

    def close(self) -> None:
        """Enumeration is over: once the work runs out, runners may stop."""
        self._closed = True

    def take(self, runner: int, finished: int | None = None) -> Item | str | None:
        """The next item for ``runner`` (which has finished item ``finished``); :data:`WAIT` if
        there is none now but runners still hold work that may add some; None when all is done
        (or while paused, when the policy has nothing for a paused runner: the runner stops)."""
        if finished is not None:
            self._held.pop(finished, None)
        item = self._policy.take(self._paused)
        if item is None:
            if self._paused or (self._closed and not self._held):
                self._runners.discard(runner)
                return None
            self._runners.add(runner)
            return WAIT
        self._runners.add(runner)
        item = dataclasses.replace(item, id=next(self._ids))
        self._held[item.id] = (runner, item)
        self._taken.setdefault(runner, []).append(item)
        return item

    def lost(self, runner: int, known: int | None, batches: list[tuple[list[CaseInfo], bool]]) -> list[Item]:
        """``runner`` died or was stopped; the driver last heard it start item ``known`` (what it
        knew of that item is in ``batches``, to hand out again first). Returns the items the
        runner took after ``known``: their reports (even of items it finished) went down with it,
        so the driver runs them again, carefully."""
        self._runners.discard(runner)
        taken = self._taken.pop(runner, [])
        ids = [item.id for item in taken]
        unreported = taken[ids.index(known) + 1 :] if known in ids else taken
        for item in unreported:
            self._held.pop(item.id, None)
        self._held.pop(known, None)
        self.resubmit(batches)
        return unreported

    def pause(self, paused: bool) -> None:
        """While paused (split cases run: their chunks are cut for every worker of the cluster),
        runners take only what the policy hands out to paused runners, and stop when it has
        nothing (the default policy: costly cases, which may be split cases too)."""
        self._paused = paused

    def idle(self) -> bool:
        """Nothing to hand out and nothing held."""
        return not (self._policy.pending() or self._held)
