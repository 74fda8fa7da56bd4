"""The protocols between a run's orchestration (:mod:`.runner`) and its parts: a
:class:`Dispatcher` runs cases somewhere and tells a :class:`Sink` what it learns; a
:class:`Listener` is told about the run as it goes. Below both the runner and the dispatchers,
which import it (and not each other).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

from distcheck.runner.records import RecordBatch
from distcheck.runner.result import RunResult
from distcheck.suites.base import CaseInfo, GroupInfo

if TYPE_CHECKING:
    from distcheck.runner.options import RunConfig


class Listener:
    """Told about a run as it goes (a progress bar subclasses it); does nothing by default."""

    def started(self, result: RunResult) -> None:
        """The run starts (``result`` has its suite, mode, executor and workers)."""

    def enumerated(self, cases: int, complete: bool) -> None:
        """``cases`` enumerated so far; ``complete`` once they all are."""

    def recorded(self, batch: RecordBatch) -> None:
        """Cases have their verdicts (their final ones: a case held for reruns is told once
        settled), as a batch (a runner's report, or a single record): read its columns, or
        ``batch.records()`` (made for whoever reads them)."""

    def finished(self, result: RunResult) -> None:
        """The run is over."""


class Listeners(Listener):
    """Several listeners, told in turn."""

    def __init__(self, *listeners: Listener):
        self.listeners = listeners

    def started(self, result: RunResult) -> None:
        for listener in self.listeners:
            listener.started(result)

    def enumerated(self, cases: int, complete: bool) -> None:
        for listener in self.listeners:
            listener.enumerated(cases, complete)

    def recorded(self, batch: RecordBatch) -> None:
        for listener in self.listeners:
            listener.recorded(batch)

    def finished(self, result: RunResult) -> None:
        for listener in self.listeners:
            listener.finished(result)


class Interrupted(BaseException):
    """Raised (by a signal handler) into a case running in the dispatching thread: the run
    stops, as when its ``stop`` event is set (a BaseException: no case catches it)."""


class Sink(Protocol):
    """Where a dispatcher sends what it learns: the listing of a group (its cases, runnable or
    decided while listing) and the records of finished cases, as a
    :class:`~distcheck.runner.records.RecordBatch` (a runner's report, or a single record)."""

    def listed(self, group: GroupInfo, cases: Sequence[CaseInfo]) -> None: ...

    def emit(self, batch: RecordBatch) -> None: ...


class Dispatcher(Protocol):
    """Runs cases somewhere and emits a record per case (one file per dispatcher). ``items``:
    groups to list and runnable cases listed already, as :func:`~.run.work` yields them."""

    name: str
    stop: threading.Event  # set: start no further case, cancel what runs
    first_dispatch: float | None  # perf_counter() when it first handed out work (None: not told)
    placement: str | None  # on GPUs: how its runners sit on them ("4 runner(s) on 1 GPU(s) (0.25 GPU each)")

    @property
    def workers(self) -> int: ...

    def run(self, config: RunConfig, items: Iterator[GroupInfo | CaseInfo], sink: Sink) -> None:
        """Run the cases of ``items`` as ``config`` says (a rerun's ``attempt``: in fresh worker
        processes where there are workers)."""
