"""The work of a Ray dispatch and the order it is handed out in.

:class:`Enumeration` pulls the suite's groups (and cases listed on the driver) in a background
thread — all of them first, to sort the groups longest first, when durations are known.

:class:`WorkQueue` holds the work; on Ray it lives in an actor, from which every runner takes
its next item (so the driver is not in the path of each task). It hands out, in this order:

1. work resubmitted after a timeout or a lost worker (first: it was started long ago);
2. **costly cases**, one per item, heaviest first (the longest work starts early, and a case
   to split is found early);
3. **groups** to list (an op in a dtype: a runner lists its cases and runs its first share of
   them; the rest comes back here);
4. **listed cases** in batches of consecutive cases of one group (short batches fill the end).

It knows which runner holds which item, so that the work of a runner that dies or is stopped
can be given out again, and when everything is done.
"""

from __future__ import annotations

import collections
import dataclasses
import heapq
import itertools
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from distcheck.runner.batches import CaseList
from distcheck.runner.durations import GUIDE, MIN_BATCH_SECONDS, CostlyRule, Durations
from distcheck.suites.base import CaseInfo, GroupInfo

_END = object()
WAIT = "wait"  # WorkQueue.take: nothing now, ask again (other runners may still add work)


@dataclass(frozen=True)
class Item:
    """One piece of work for a runner: a group to list (with the costly rule of that group),
    or a batch of listed cases (a :class:`~distcheck.runner.batches.CaseList`: the driver, to
    which a runner tells the item it starts, does not unpickle them); ``careful``: report
    after every case."""

    id: int
    group: GroupInfo | None = None
    rule: object = None
    cases: Sequence[CaseInfo] = ()
    careful: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "cases", CaseList.of(self.cases))


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
    """The work of a dispatch (see the module's doc). ``costly``: which cases go alone (see
    :mod:`.durations`); ``size``: cases per batch; ``durations``: a previous run's, if known —
    then batches (and the share of a group a runner runs itself) are cut by recorded work, each
    a 1/(GUIDE × ``workers``) part of the work not handed out yet, so that they shrink towards
    the end of the run and the workers finish together."""

    def __init__(self, costly: CostlyRule, size: int, durations: Durations | None = None, workers: int = 1):
        self._costly_rule, self._size, self._durations, self._workers = costly, size, durations, workers
        self._rule = durations.rule(costly) if durations else costly
        self._weight = self._rule.weight
        self._remaining = durations.total if durations else 0.0  # recorded work not handed out yet
        self._counted: set[tuple[str, str]] = set()  # groups whose work was counted out whole
        self._front: collections.deque[Item] = collections.deque()
        self._costly: list[tuple[float, int, CaseInfo]] = []  # a heap
        self._groups: collections.deque[GroupInfo] = collections.deque()
        self._listed: collections.deque[CaseInfo] = collections.deque()
        self._ids = itertools.count()
        self._held: dict[int, tuple[int, Item]] = {}  # item id -> (runner, item)
        self._runners: set[int] = set()  # runners taking work
        self._taken: dict[int, list[Item]] = {}  # per runner, the items it took, in order
        self._closed = self._paused = False

    def put(self, work: list[GroupInfo | CaseInfo]) -> None:
        """Groups to list, and runnable listed cases (costly ones alone, the others in batches)."""
        for entry in work:
            if isinstance(entry, GroupInfo):
                self._groups.append(entry)
                continue
            weight = self._weight(entry)
            if weight is None:
                self._listed.append(entry)
            else:
                heapq.heappush(self._costly, (-weight, next(self._ids), entry))

    def resubmit(self, batches: list[tuple[list[CaseInfo], bool]]) -> None:
        """Batches of cases ``(cases, careful)`` to hand out before anything else."""
        for cases, careful in reversed(batches):
            self._front.appendleft(Item(next(self._ids), cases=tuple(cases), careful=careful))

    def close(self) -> None:
        """Enumeration is over: once the work runs out, runners may stop."""
        self._closed = True

    def take(self, runner: int, finished: int | None = None) -> Item | str | None:
        """The next item for ``runner`` (which has finished item ``finished``); :data:`WAIT` if
        there is none now but runners still hold work that may add some; None when all is done
        (or while paused, unless a costly case is left: the runner stops)."""
        if finished is not None:
            self._held.pop(finished, None)
        if self._paused and not self._costly:
            self._runners.discard(runner)
            return None
        self._runners.add(runner)
        item = self._next_costly() if self._paused else self._next()
        if item is None:
            if self._closed and not self._held:
                self._runners.discard(runner)
                return None
            return WAIT
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
        """While paused, runners that ask for work stop instead (their CPUs go to the chunks of
        split cases, which are cut for every worker of the cluster) — but for the costly cases:
        those are the ones that may be split cases too, and a runner that takes one finds out
        at once (its estimate), so that split cases run together instead of one after another."""
        self._paused = paused

    def _next(self) -> Item | None:
        if self._front:
            return self._front.popleft()
        if self._costly:
            return self._next_costly()
        if self._groups:
            group = self._groups.popleft()
            if self._durations is None:
                return Item(next(self._ids), group=group, rule=self._costly_rule)
            rule = self._durations.rule(self._costly_rule, group, self._batch_seconds())
            if group.key not in self._counted:
                self._counted.add(group.key)
                self._remaining -= self._durations.group_seconds(group)
            return Item(next(self._ids), group=group, rule=rule)
        if not self._listed:
            return None
        first = self._listed[0]
        ahead = itertools.islice(self._listed, 0, GUIDE * self._size)
        run = list(itertools.takewhile(lambda case: case.group == first.group, ahead))
        rule = self._rule
        if self._durations is not None:
            rule = dataclasses.replace(rule, batch_seconds=self._batch_seconds())
        batch = [self._listed.popleft() for _ in range(rule.batch(run, self._size))]
        if self._durations is not None and first.group not in self._counted:
            self._remaining -= sum(rule.seconds(case) or 0.0 for case in batch)
        return Item(next(self._ids), cases=tuple(batch))

    def _next_costly(self) -> Item:
        case = heapq.heappop(self._costly)[2]
        if self._durations is not None and case.group not in self._counted:
            self._remaining -= self._rule.seconds(case) or 0.0
        return Item(next(self._ids), cases=(case,))

    def _batch_seconds(self) -> float:
        return max(MIN_BATCH_SECONDS, self._remaining / (GUIDE * self._workers))

    def idle(self) -> bool:
        """Nothing to hand out and nothing held."""
        return not (self._front or self._costly or self._groups or self._listed or self._held)
