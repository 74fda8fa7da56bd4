"""A :class:`Listener` is told about a run as it goes: the run folder's writer, the progress
line, a benchmark's counter."""

from __future__ import annotations

from distcheck.records.case_record import RecordBatch
from distcheck.records.result import RunResult


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
