"""The protocols between a run's orchestration (:mod:`.run`) and its dispatchers: a
:class:`Dispatcher` runs cases somewhere and tells a :class:`Sink` what it learns. Below both
the run and the dispatchers, which import it (and not each other)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

from distcheck.records.case_record import RecordBatch
from distcheck.suites.base import CaseInfo, GroupInfo

if TYPE_CHECKING:
    from distcheck.runner.options import RunConfig


class Interrupted(BaseException):
    """Raised (by a signal handler) into a case running in the dispatching thread: the run
    stops, as when its ``stop`` event is set (a BaseException: no case catches it)."""


class Sink(Protocol):
    """Where a dispatcher sends what it learns: the listing of a group (its cases, runnable or
    decided while listing) and the records of finished cases, as a
    :class:`~distcheck.records.case_record.RecordBatch` (a runner's report, or a single record)."""

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
