"""Reruns (``reruns`` N): the cases held back bad run again in fresh workers, up to N times;
passing on a rerun makes a case ``flaky``, with every attempt in its record."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from distcheck.records.case_record import FLAKY, PASS, CaseRecord, RecordBatch
from distcheck.runner.collector import Collector
from distcheck.runner.options import RunConfig
from distcheck.runner.protocols import Dispatcher
from distcheck.suites.base import CaseInfo, GroupInfo


class _Outcomes:
    """A sink that keeps the records of a rerun."""

    def __init__(self):
        self.records: list[CaseRecord] = []

    def listed(self, group: GroupInfo, cases: Sequence[CaseInfo]) -> None:
        raise AssertionError("a rerun dispatches listed cases only")

    def emit(self, batch: RecordBatch) -> None:
        self.records.extend(batch.records())


def _attempt(record: CaseRecord) -> dict[str, object]:
    return {"verdict": record.verdict, "seconds": round(record.seconds, 6), "message": record.message}


def rerun(dispatcher: Dispatcher, config: RunConfig, collector: Collector) -> None:
    """Run the held (bad) cases again, up to ``reruns`` times each, in fresh workers: a case
    that passes once is ``flaky``; one that never does keeps its first verdict. Every attempt
    goes into the record."""
    attempts = {key: [_attempt(record)] for key, (_, record) in collector.held.items()}
    reruns = config.options.reruns
    for k in range(1, reruns + 1):
        if not collector.held or dispatcher.stop.is_set():
            break
        outcomes = _Outcomes()
        dispatcher.run(replace(config, attempt=k), iter([info for info, _ in collector.held.values()]), outcomes)
        for record in outcomes.records:
            attempts[record.id].append(_attempt(record))
            if record.verdict == PASS:
                _, first = collector.held.pop(record.id)
                message = f"passed on rerun {k} of {reruns}; the first run said {first.verdict}: {first.message}"
                flaky = replace(first, verdict=FLAKY, message=message, attempts=tuple(attempts[record.id]))
                collector.settle(RecordBatch([flaky]))
    if dispatcher.stop.is_set():
        return  # held cases have no final verdict: a resume runs them again
    for key, (_, first) in list(collector.held.items()):
        del collector.held[key]
        collector.settle(RecordBatch([replace(first, attempts=tuple(attempts[key]))]))
