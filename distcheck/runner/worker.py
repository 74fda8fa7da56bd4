"""What runs on the workers of a Ray dispatch. A **runner** (:func:`runner`, one per worker), a
Ray generator, takes items from the work queue until there are none and yields reports (lists
of :mod:`.messages`) every ``report_every`` seconds of work, and at once when it runs out of
work, starts after being idle or finds a case to split; a chunk goes apart (``ChunkDone``, then
its result). A **careful task** (:func:`careful`) runs one item, each case's report received
before the next case starts (a case that kills its worker keeps the others').
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import ray

from distcheck.case.first_failure import Stops
from distcheck.case.run import Outcome, SplitRequest, prepare, recorded, run_case
from distcheck.records.case_record import CaseRecord, RecordBatch
from distcheck.runner.messages import ChunkDone, ChunkStarted, Finished, Idle, Listed, Ready, Soon, Started, Unlisted
from distcheck.runner.options import RunConfig
from distcheck.runner.policy import Item
from distcheck.runner.split.chunks import Chunk, run_chunk
from distcheck.suites.base import CaseInfo
from distcheck.suites.case_list import CaseList

IDLE_WAIT = (0.02, 0.5)  # a runner that finds no work asks again after this long, doubling
SPLIT_WAIT = 0.1  # at most this long while split cases run (their chunks wait for a runner that asks)


@ray.remote(num_cpus=1, max_retries=0, num_returns="streaming")
def runner(runner_id: int, queue, config: RunConfig) -> Iterator[list]:
    """The runner ``runner_id``: :class:`~.messages.Ready` once it has loaded the suite, then
    reports of the items it takes from ``queue`` (the queue's actor) until there are none."""
    prepare(config.suite)
    yield [Ready()]

    def take(finished: int | None):
        return ray.get(queue.take.remote(runner_id, finished))

    yield from _reports(take, queue.put.remote, config, config.report_every)


@ray.remote(num_cpus=1, max_retries=0, num_returns="streaming", _generator_backpressure_num_objects=1)
def careful(item: Item, config: RunConfig) -> Iterator[list]:
    """A careful item (see the module's doc): a group is listed again, all its runnable cases
    run here; a report after every case."""
    prepare(config.suite)
    items = iter([item])
    yield from _reports(lambda finished: next(items, None), None, config, 0.0)


def _reports(take: Callable, put: Callable | None, config: RunConfig, report_every: float) -> Iterator[list]:
    """The reports of the items ``take(finished)`` gives (``finished``: the last item done);
    ``put`` hands the queue the listed cases the item's head leaves."""
    pending: list = []
    reported, finished, pause, idle, chunks = time.monotonic(), None, IDLE_WAIT[0], True, False
    stops = Stops()  # tests failed as expected here: their later samples are not run

    def report(*last) -> list:
        nonlocal pending, reported
        sent, pending, reported = [*pending, *last], [], time.monotonic()
        return sent

    def due() -> bool:
        return time.monotonic() - reported >= report_every

    while (item := take(finished)) is not None:
        if type(item) is Chunk:
            if pending or not chunks:  # after an item: the driver learns it is in chunks now
                yield report(ChunkStarted(item.key))
            result = run_chunk(item)
            yield [ChunkDone(item.key)]  # (which tells the driver the runner is alive)
            yield result
            finished, idle, chunks = None, True, True  # its next start goes out at once
            continue
        chunks = False
        if type(item) is not Item:  # Wait or Soon: nothing now
            if pending or finished is not None:
                yield report(Idle())
                finished, idle = None, True
            time.sleep(min(pause, SPLIT_WAIT) if type(item) is Soon else pause)
            pause = min(2 * pause, IDLE_WAIT[1])
            continue
        pause = IDLE_WAIT[0]
        pending.append(Started(item))
        if idle or due():
            yield report()
            idle = False
        cases = item.cases
        if item.group is not None:
            try:
                listing = config.suite.list_group(item.group, config.selection)
            except Exception as e:
                pending.append(Unlisted(item.id, f"listing the group failed: {type(e).__name__}: {e}"))
                finished = item.id
                continue
            head, rest = item.divide(listing)
            if rest:
                put(rest)  # before this runner's next take (actor calls keep their order)
            pending.append(Listed(item.id, CaseList(listing), head))
            if due():
                yield report()
            cases = [listing[k] for k in head]
        done = _Done(item.id, config.keeps_blocks)
        for k, case in enumerate(cases):
            skipped = stops.skipped(case.id)
            if skipped is not None:
                done.add(k, case, skipped)
                continue
            outcome = run_case(config.suite, case.id, case.fingerprint, config.budget, vectorize=config.vectorize)
            done.add(k, case, outcome)
            stops.note(case.id, getattr(outcome, "verdict", None))
            # a case to split goes out at once: its coordinator starts on the driver's word, and
            # this runner's next item may take long
            if due() or type(outcome) is SplitRequest:
                yield report(done.message())
                done = _Done(item.id, done.keep_blocks)
        if done:
            pending.append(done.message())
        finished = item.id
    if pending:
        yield pending


class _Done:
    """The cases of an item a runner finished since its last report (see
    :class:`~.messages.Finished`)."""

    def __init__(self, item_id: int, keep_blocks: bool):
        self.item_id, self.keep_blocks, self.upto = item_id, keep_blocks, None
        self.records: list[CaseRecord] = []
        self.blocks: dict = {}
        self.splits: list[tuple[int, SplitRequest]] = []

    def add(self, k: int, case: CaseInfo, outcome: Outcome | SplitRequest | CaseRecord) -> None:
        if type(outcome) is SplitRequest:
            self.splits.append((k, outcome))
        elif type(outcome) is CaseRecord:  # decided without running
            self.records.append(outcome)
        else:
            record, blocks = recorded(case, outcome, 1, self.keep_blocks)
            self.records.append(record)
            self.blocks.update(blocks)
        self.upto = k + 1

    def __bool__(self) -> bool:
        return self.upto is not None

    def message(self) -> Finished:
        return Finished(self.item_id, self.upto, RecordBatch(self.records), self.blocks, tuple(self.splits))
