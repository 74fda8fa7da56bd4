"""The work of a Ray dispatch and who holds it.

:class:`Enumeration` pulls the suite's groups (and cases listed on the driver) in a background
thread — all of them first, to sort the groups heaviest first, when the policy weighs them.

:class:`WorkQueue` holds the work; on Ray it lives in an actor, from which every runner takes
its next item (so the driver is not in the path of each task). Its
:class:`~distcheck.runner.policy.WorkPolicy` decides the order of the work and its pieces (the
default: :mod:`.default_policy`); the queue knows which runner holds which item, so that the
work of a runner that dies or is stopped can be given out again, and when everything is done.
It also holds the chunks of the split cases that run (:mod:`.chunks`): they go out before any
other work, and the queue knows which runner runs which chunk.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import queue
import threading
from collections.abc import Callable, Iterator

from distcheck.runner.chunks import CHUNK_TRIES, Chunk
from distcheck.runner.policy import Item, WorkPolicy
from distcheck.suites.base import CaseInfo, GroupInfo

_END = object()
WAIT = "wait"  # WorkQueue.take: nothing now, ask again (other runners may still add work)
SOON = "soon"  # WorkQueue.take: nothing now, ask again soon (a split case runs: its chunks may come)


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
        self._closed = False
        self._chunks: collections.deque[Chunk] = collections.deque()  # split cases' chunks to run
        self._running: dict[int, Chunk] = {}  # runner -> the chunk it runs now
        # runner -> the chunks it took whose results the driver has not forwarded yet: they go
        # down with it (a runner's unread reports die with its process)
        self._unforwarded: dict[int, dict[tuple[int, int], Chunk]] = {}
        self._splits: set[int] = set()  # split cases that run (their coordinators may add chunks)
        self._ended: set[int] = set()  # split cases that ended (chunks they still add are dropped)

    def put(self, work: list[GroupInfo | CaseInfo]) -> None:
        """Groups to list, and runnable listed cases."""
        self._policy.put(work)

    def resubmit(self, batches: list[tuple[list[CaseInfo], bool]]) -> None:
        """Batches of cases ``(cases, careful)`` given back, to hand out again."""
        self._policy.resubmit(batches)

    def close(self) -> None:
        """Enumeration is over: once the work runs out, runners may stop."""
        self._closed = True

    def take(self, runner: int, finished: int | None = None) -> Item | Chunk | str | None:
        """The next item for ``runner`` (which has finished item ``finished``, and whatever
        chunk it ran): a split case's chunk first; :data:`WAIT` if there is none now but runners
        still hold work that may add some, :data:`SOON` if split cases do; None when all is
        done."""
        if finished is not None:
            self._held.pop(finished, None)
        self._running.pop(runner, None)
        if self._chunks:
            self._runners.add(runner)
            self._running[runner] = chunk = self._chunks.popleft()
            self._unforwarded.setdefault(runner, {})[chunk.key] = chunk
            return chunk
        item = self._policy.take()
        if item is None:
            if self._closed and not self._held and not self._splits:
                self._runners.discard(runner)
                return None
            self._runners.add(runner)
            return SOON if self._splits else WAIT
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

    def open_split(self, split: int) -> None:
        """Split case ``split`` runs: runners wait for its chunks rather than stop."""
        if split not in self._ended:
            self._splits.add(split)

    def put_chunks(self, chunks: list[Chunk]) -> None:
        """A running split case's chunks, to hand out before anything else."""
        self._chunks.extend(chunk for chunk in chunks if chunk.split not in self._ended)

    def drop_chunks(self, keys: list[tuple[int, int]]) -> None:
        """Chunks whose results are no longer wanted: those not handed out yet are dropped."""
        dropped = set(keys)
        self._chunks = collections.deque(chunk for chunk in self._chunks if chunk.key not in dropped)

    def forwarded(self, chunks: list[tuple[int, tuple[int, int]]]) -> None:
        """The driver has forwarded the results of these chunks ``(runner, key)``."""
        for runner, key in chunks:
            self._unforwarded.get(runner, {}).pop(key, None)

    def end_split(self, split: int) -> list[int]:
        """Split case ``split`` has ended: its chunks not handed out are dropped, and so are
        those it adds later. Returns the runners that run one of its chunks now."""
        self._splits.discard(split)
        self._ended.add(split)
        self._chunks = collections.deque(chunk for chunk in self._chunks if chunk.split != split)
        running = [runner for runner, chunk in self._running.items() if chunk.split == split]
        for runner in running:
            del self._running[runner]
        for chunks in self._unforwarded.values():
            for key in [key for key in chunks if key[0] == split]:
                del chunks[key]
        return running

    def chunk_lost(self, runner: int) -> tuple[bool, list[Chunk]]:
        """``runner`` died or was stopped: whether it ran a chunk then. Every chunk it took whose
        result the driver has not forwarded runs again first — unless that was its last try:
        those are returned (given up)."""
        ran = self._running.pop(runner, None) is not None
        given_up = []
        for chunk in reversed(self._unforwarded.pop(runner, {}).values()):
            if chunk.tries + 1 >= CHUNK_TRIES:
                given_up.append(chunk)
            else:
                self._chunks.appendleft(dataclasses.replace(chunk, tries=chunk.tries + 1))
        return ran, given_up

    def idle(self) -> bool:
        """Nothing to hand out and nothing held."""
        return not (self._policy.pending() or self._held or self._chunks or self._running)
