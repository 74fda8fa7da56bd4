"""The work of a Ray dispatch and who holds it: :class:`Enumeration` pulls the suite's groups
(and cases listed on the driver) in a background thread; :class:`WorkQueue`, in an actor from
which every runner takes its next item, holds the work in the order its
:class:`~distcheck.runner.policy.WorkPolicy` says, knows which runner holds which item and
hands split cases' chunks out first (:mod:`.split.chunks`).
"""

from __future__ import annotations

import dataclasses
import itertools
import queue
import threading
from collections.abc import Callable, Iterator

from distcheck.runner.messages import Soon, Wait
from distcheck.runner.policy import Item, WorkPolicy
from distcheck.runner.split.chunks import Chunk, ChunkLane
from distcheck.suites.base import CaseInfo, GroupInfo

_END = object()
WAIT, SOON = Wait(), Soon()


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
        self._held: dict[int, Item] = {}  # item id -> item, while a runner holds it
        self._taken: dict[int, list[Item]] = {}  # per runner, the items it took, in order
        self._closed = False
        self._chunks = ChunkLane()

    def put(self, work: list[GroupInfo | CaseInfo]) -> None:
        """Groups to list, and runnable listed cases."""
        self._policy.put(work)

    def resubmit(self, batches: list[tuple[list[CaseInfo], bool]]) -> None:
        """Batches of cases ``(cases, careful)`` given back, to hand out again."""
        self._policy.resubmit(batches)

    def close(self) -> None:
        """Enumeration is over: once the work runs out, runners may stop."""
        self._closed = True

    def take(self, runner: int, finished: int | None = None) -> Item | Chunk | Wait | Soon | None:
        """The next item for ``runner`` (which has finished item ``finished``, and whatever
        chunk it ran): a split case's chunk first; :data:`WAIT` if there is none now but runners
        still hold work that may add some, :data:`SOON` if split cases run; None when all is
        done."""
        if finished is not None:
            self._held.pop(finished, None)
        chunk = self._chunks.take(runner)
        if chunk is not None:
            return chunk
        item = self._policy.take()
        if item is None:
            if self._closed and not self._held and not self._chunks.open:
                return None
            return SOON if self._chunks.open else WAIT
        item = dataclasses.replace(item, id=next(self._ids))
        self._held[item.id] = item
        self._taken.setdefault(runner, []).append(item)
        return item

    def lost(self, runner: int, known: int | None) -> list[Item]:
        """``runner`` died or was stopped; the driver last heard it start item ``known``.
        Returns the items the runner took after ``known``: their reports (even of items it
        finished) went down with it, so the driver runs them again, carefully."""
        taken = self._taken.pop(runner, [])
        ids = [item.id for item in taken]
        unreported = taken[ids.index(known) + 1 :] if known in ids else taken
        for item in unreported:
            self._held.pop(item.id, None)
        self._held.pop(known, None)
        return unreported

    def idle(self) -> bool:
        """Nothing to hand out and nothing held."""
        chunks = self._chunks
        return not (self._policy.pending() or self._held or chunks.waiting or chunks.running)

    # the split cases' chunks (see ChunkLane)

    def open_split(self, split: int) -> None:
        """Split case ``split`` runs: runners wait for its chunks rather than stop."""
        self._chunks.start(split)

    def put_chunks(self, chunks: list[Chunk]) -> None:
        self._chunks.put(chunks)

    def drop_chunks(self, keys: list[tuple[int, int]]) -> None:
        """Chunks whose results are no longer wanted: those not handed out yet are dropped."""
        self._chunks.drop(keys)

    def forwarded(self, chunks: list[tuple[int, tuple[int, int]]]) -> None:
        """The driver has forwarded the results of these chunks ``(runner, key)``."""
        self._chunks.forwarded(chunks)

    def end_split(self, split: int) -> list[int]:
        """Split case ``split`` has ended: the runners that run one of its chunks now."""
        return self._chunks.end(split)

    def chunk_lost(self, runner: int) -> tuple[bool, list[Chunk]]:
        """``runner`` died or was stopped: whether it ran a chunk, and the chunks given up."""
        return self._chunks.lost(runner)
