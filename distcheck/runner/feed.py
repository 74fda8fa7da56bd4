"""The cases to dispatch: enumerated in a background thread (so that the first batches run
while later ops are still being enumerated), handed out in batches of one group — except
costly cases (by their cost hint), which are handed out first, one per batch: the longest
work starts early (and a case to split is found early), short batches fill the end of the run."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

from distcheck.suites.base import CaseInfo

_END = object()


class Feed:
    """Pulls ``cases`` in a daemon thread; :meth:`batch` waits for it at most as long as told.
    Cases whose ``cost`` is at least ``costly`` go ahead of the others."""

    def __init__(self, cases: Iterator[CaseInfo], costly: int | None = None):
        self._queue: queue.Queue = queue.Queue()
        self._costly: queue.Queue = queue.Queue()
        self._held: CaseInfo | None = None  # taken from the queue, but of the next group
        self._exhausted = False
        self._enumerated = threading.Event()
        self._thread = threading.Thread(
            target=self._produce, args=(cases, costly), name="distcheck-enumeration", daemon=True
        )
        self._thread.start()

    def _produce(self, cases: Iterator[CaseInfo], costly: int | None) -> None:
        try:
            for case in cases:
                lane = self._costly if costly is not None and case.cost >= costly else self._queue
                lane.put(case)
            self._queue.put(_END)
        except BaseException as e:  # handed to the dispatching thread, which raises it
            self._queue.put(e)
        finally:
            self._enumerated.set()

    def _take(self, wait: float) -> CaseInfo | None:
        if self._held is not None:
            case, self._held = self._held, None
            return case
        if self._exhausted:
            return None
        try:
            item = self._queue.get(timeout=wait) if wait > 0 else self._queue.get_nowait()
        except queue.Empty:
            return None
        if item is _END:
            self._exhausted = True
            return None
        if isinstance(item, BaseException):
            self._exhausted = True
            raise item
        return item

    @property
    def enumerated(self) -> bool:
        """Enumeration is over (the cases may not all have been handed out yet)."""
        return self._enumerated.is_set()

    @property
    def done(self) -> bool:
        """Every case has been handed out."""
        return self._exhausted and self._held is None and self._costly.empty()

    def batch(self, size: int, wait: float = 0.0) -> list[CaseInfo]:
        """A costly case alone; else up to ``size`` consecutive cases of one group: those
        available now (waiting up to ``wait`` seconds for the first)."""
        try:
            return [self._costly.get_nowait()]
        except queue.Empty:
            pass
        first = self._take(wait)
        if first is None:
            return []
        cases = [first]
        while len(cases) < size:
            case = self._take(0.0)
            if case is None:
                break
            if case.group != first.group:
                self._held = case
                break
            cases.append(case)
        return cases
