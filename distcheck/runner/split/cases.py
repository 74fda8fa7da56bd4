"""A dispatch's split cases, on the driver: started on coordinators, at most ``max(2, P / 8)`` at
once, each cut for its share of the ``P`` workers (:func:`split_share`); their chunks' results
forwarded to their coordinators; their records emitted."""

from __future__ import annotations

import collections
import itertools
import time
from dataclasses import dataclass

import ray

from distcheck.case.run import timeout_record
from distcheck.records.case_record import ERROR, CaseRecord, RecordBatch
from distcheck.runner.split.chunks import Chunk
from distcheck.runner.split.coordinator import Coordinators
from distcheck.suites.base import CaseInfo

SPLITS_AT_ONCE = 2  # split cases running at once, at least (a cluster of P workers: P / 8)
COORDINATORS_LOST = 2  # a split case goes to another coordinator when one dies before beginning it


def split_share(workers: int, most: int, running: int, waiting: int) -> int:
    """The workers a split case's Jacobians are cut for as it starts, with ``running`` other
    split cases running and ``waiting`` more to start (at most ``most`` run at once): its share
    of the cluster while they run (the cost model cuts a share in more rounds of shrinking
    chunks, its last ones as short as a lone split case's)."""
    return max(1, workers // max(1, min(most, running + 1 + waiting)))


@dataclass
class SplitCase:
    """A split case on the driver: its ``id`` in the queue, since when its coordinator runs it
    (None: not begun) and how many coordinators were lost before it began (not its doing)."""

    case: CaseInfo
    id: int = 0
    since: float | None = None
    lost: int = 0


class SplitCases:
    """A dispatch's split cases, on the driver: at most ``max(2, P / 8)`` run at once, each cut
    for its share of the ``P`` workers; more wait. The driver forwards the chunks' results to
    their coordinators and emits each case's record to ``sink``."""

    def __init__(self, config, config_ref, queue, pool: Coordinators, sink):
        self.config, self.config_ref, self.queue, self.pool, self.sink = config, config_ref, queue, pool, sink
        self.most = max(SPLITS_AT_ONCE, config.workers // 8)
        self.waiting: collections.deque[SplitCase] = collections.deque()
        self.running: dict[ray.ObjectRefGenerator, SplitCase] = {}
        self.by_id: dict[int, ray.ObjectRefGenerator] = {}
        self.results: list[tuple[int, tuple[int, int], ray.ObjectRef]] = []  # to forward
        self.ids = itertools.count()

    @property
    def active(self) -> bool:
        return bool(self.running or self.waiting)

    def add(self, case: CaseInfo) -> None:
        self.waiting.append(SplitCase(case))

    def start_waiting(self) -> bool:
        """Start waiting split cases up to :attr:`most` running; whether one started."""
        started = False
        while self.waiting and len(self.running) < self.most:
            split = self.waiting.popleft()
            split.id = next(self.ids)
            self.queue.open_split.remote(split.id)
            share = split_share(self.config.workers, self.most, len(self.running), len(self.waiting))
            generator = self.pool.start(self.config.suite, self.config_ref, split.case, self.queue, split.id, share)
            self.running[generator] = split
            self.by_id[split.id] = generator
            started = True
        return started

    def begun(self, generator: ray.ObjectRefGenerator) -> None:
        self.running[generator].since = time.monotonic()

    def ended(self, generator: ray.ObjectRefGenerator, error: BaseException | None) -> None:
        """The coordinator's run ended (``error``: its actor died or raised)."""
        split = self.running.pop(generator)
        self.pool.done(generator, failed=error is not None)
        self.end(split)
        if error is not None and split.since is None and split.lost < COORDINATORS_LOST:
            split.lost += 1  # a coordinator that died before it began the case (kept from an earlier run)
            self.waiting.appendleft(split)
        elif error is not None:
            self.sink.emit(RecordBatch([CaseRecord(split.case.id, ERROR, f"the split case stopped: {error}", 0.0, 1)]))

    def end(self, split: SplitCase) -> ray.ObjectRef:
        """``split`` ended: the queue drops its chunks. The runners that run one (a reference)."""
        self.by_id.pop(split.id, None)
        return self.queue.end_split.remote(split.id)

    def forward(self, runner: int, key: tuple[int, int], ref: ray.ObjectRef) -> None:
        self.results.append((runner, key, ref))

    def flush(self) -> None:
        """Forward the chunks' results received in a round: one call per coordinator, and one
        to the queue (which keeps each chunk until its result is forwarded)."""
        if not self.results:
            return
        by_actor = collections.defaultdict(list)
        for _, key, ref in self.results:
            actor = self._actor(key[0])
            if actor is not None:
                by_actor[actor].append((key, [ref]))
        for actor, results in by_actor.items():
            actor.deliver.remote(results)
        self.queue.forwarded.remote([(runner, key) for runner, key, _ in self.results])
        self.results = []

    def give_up(self, chunks: list[Chunk], what: str) -> None:
        """Chunks lost with their runner :data:`CHUNK_TRIES` times: their coordinator gets the
        loss (``what`` ended the last runner) as their units' error."""
        for chunk in chunks:
            actor = self._actor(chunk.split)
            if actor is not None:
                message = f"the chunk's runner was lost {chunk.tries + 1} times; last: {what}"
                actor.deliver.remote([(chunk.key, message)])

    def _actor(self, split: int):
        generator = self.by_id.get(split)
        return None if generator is None else self.pool.actor(generator)

    def timed_out(self, now: float) -> list[int]:
        """Stop the split cases past the timeout (their records say so); the runners that run
        their chunks (to stop: a chunk may be what hangs)."""
        stop: list[int] = []
        timeout = self.config.timeout
        for generator, split in list(self.running.items()):
            if timeout is not None and split.since is not None and now - split.since > timeout:
                self.pool.kill(generator)
                del self.running[generator]
                stop += ray.get(self.end(split))
                self.sink.emit(RecordBatch([timeout_record(split.case, timeout, now - split.since)]))
        return stop

    def stop(self) -> None:
        for generator in self.running:
            self.pool.kill(generator)
