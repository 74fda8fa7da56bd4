"""A split case's chunks: what a runner runs between its items (:func:`run_chunk`), and their
lane in the work queue (:class:`ChunkLane`), which hands them out before any other work."""

from __future__ import annotations

import collections
import contextlib
from dataclasses import dataclass, replace

from distcheck.case import probe
from distcheck.executors.ray_blocks import run_block_job
from distcheck.executors.ray_tasks import run_units, worker_subject
from distcheck.plan.comparisons import BlockJob, JobOutcome
from distcheck.plan.units import Unit, UnitResult

CHUNK_TRIES = 4  # runs of a chunk whose runner died each time, at most (a Ray task's 1 + max_retries 3)


@dataclass(frozen=True)
class Chunk:
    """A piece of a split case's check: ``units`` against the subject in ``box`` (a nested
    reference), or a block ``job`` over the unit results in ``where`` (nested references).
    ``key``: (the split case's id in the dispatch, the chunk's number); ``tries``: runs lost
    with their runner so far."""

    key: tuple[int, int]
    box: list | None = None
    units: tuple[Unit, ...] = ()
    job: BlockJob | None = None
    where: list | None = None
    tries: int = 0

    @property
    def split(self) -> int:
        return self.key[0]


def run_chunk(chunk: Chunk) -> list[UnitResult] | JobOutcome:
    """Run ``chunk`` in this process (a runner's)."""
    hook = probe.hook()
    if hook is None:
        return _run_chunk(chunk)
    kind = "chunk" if chunk.job is None else "block job"
    with hook.piece(kind, f"split {chunk.split} {kind} {chunk.key[1]}") as piece:
        results = _run_chunk(chunk)
        if chunk.job is None:  # the subject is this process's cached copy
            with contextlib.suppress(Exception):
                piece.inputs_of([v.inputs for v in worker_subject(chunk.box[0]).variants.values()])
        return results


def _run_chunk(chunk: Chunk) -> list[UnitResult] | JobOutcome:
    if chunk.job is not None:
        return run_block_job(chunk.where, chunk.job)
    return run_units(chunk.box, list(chunk.units))


class ChunkLane:
    """The split cases' chunks in the work queue: handed out before any other work; which runner
    runs which, and the chunks whose results the driver has not forwarded yet (a runner's
    reports not read yet go down with it)."""

    def __init__(self):
        self.waiting: collections.deque[Chunk] = collections.deque()
        self.running: dict[int, Chunk] = {}  # runner -> the chunk it runs
        self.unforwarded: dict[int, dict[tuple[int, int], Chunk]] = {}  # runner -> chunks
        self.open: set[int] = set()  # split cases that run (their coordinators may add chunks)
        self.ended: set[int] = set()  # chunks of these are dropped

    def start(self, split: int) -> None:
        if split not in self.ended:
            self.open.add(split)

    def put(self, chunks: list[Chunk]) -> None:
        self.waiting.extend(chunk for chunk in chunks if chunk.split not in self.ended)

    def drop(self, keys: list[tuple[int, int]]) -> None:
        dropped = set(keys)
        self.waiting = collections.deque(chunk for chunk in self.waiting if chunk.key not in dropped)

    def take(self, runner: int) -> Chunk | None:
        """The next chunk for ``runner`` (which has finished whatever chunk it ran)."""
        self.running.pop(runner, None)
        if not self.waiting:
            return None
        self.running[runner] = chunk = self.waiting.popleft()
        self.unforwarded.setdefault(runner, {})[chunk.key] = chunk
        return chunk

    def forwarded(self, chunks: list[tuple[int, tuple[int, int]]]) -> None:
        for runner, key in chunks:
            self.unforwarded.get(runner, {}).pop(key, None)

    def end(self, split: int) -> list[int]:
        """Split case ``split`` ended: its chunks are dropped; the runners that run one now."""
        self.open.discard(split)
        self.ended.add(split)
        self.waiting = collections.deque(chunk for chunk in self.waiting if chunk.split != split)
        running = [runner for runner, chunk in self.running.items() if chunk.split == split]
        for runner in running:
            del self.running[runner]
        for chunks in self.unforwarded.values():
            for key in [key for key in chunks if key[0] == split]:
                del chunks[key]
        return running

    def lost(self, runner: int) -> tuple[bool, list[Chunk]]:
        """``runner`` died or was stopped: whether it ran a chunk; each chunk it took whose
        result was not forwarded runs again first, but those run too often (returned)."""
        ran = self.running.pop(runner, None) is not None
        given_up = []
        for chunk in reversed(self.unforwarded.pop(runner, {}).values()):
            if chunk.tries + 1 >= CHUNK_TRIES:
                given_up.append(chunk)
            else:
                self.waiting.appendleft(replace(chunk, tries=chunk.tries + 1))
        return ran, given_up
