"""A dispatch's runners, on the driver (:class:`Runners`): one per worker, started before the
first item and replaced when lost; what each is doing, as its reports say (:class:`Runner`);
what a lost or timed-out runner leaves, case by case: a case is blamed only when the runner
cannot have been anywhere else (docs/architecture.md, "Timeouts and lost runners")."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import ray

from distcheck.case.run import timeout_record
from distcheck.records.case_record import ERROR, CaseRecord, RecordBatch
from distcheck.runner.deaths import NODE_LOST, Deaths, WorkerDeath
from distcheck.runner.options import RunConfig
from distcheck.runner.policy import Item
from distcheck.runner.protocols import Sink
from distcheck.runner.split.chunks import Chunk
from distcheck.runner.worker import careful, runner
from distcheck.suites.base import CaseId, CaseInfo, GroupInfo
from distcheck.suites.case_list import CaseList


@dataclass
class Runner:
    """A runner (or careful task) as the driver knows it from its reports."""

    id: int
    careful: bool = False  # a careful task (one item), not a runner of the queue
    ready: bool = False  # it has begun (loaded the suite, about to take its first item)
    item: Item | None = None  # the item it works on (None: idle, not started, or in a chunk)
    cases: CaseList | None = None  # the cases of the item (a group's head, once listed)
    current: int = 0  # the first case of the item not reported yet
    since: float = 0.0  # when it last reported (driver clock)
    started: int | None = None  # the last item the driver heard it start
    chunk: tuple[int, int] | None = None  # the split case's chunk it runs (its key)

    @property
    def culprit_known(self) -> bool:
        """Whether a stuck (or deadly) runner can only be stuck in case ``current``."""
        return self.item is not None and (self.careful or self.current == len(self.cases or ()) - 1)


def group_error(group: GroupInfo, message: str) -> list[CaseInfo]:
    """A group that cannot be listed: an ``error`` per check kind."""
    return [CaseInfo(CaseId(group.suite, group.op, group.dtype, check), ERROR, message) for check in group.checks]


class Runners:
    """The runners of a dispatch: one per worker of ``config``, taking items from ``queue``,
    started in the worker environment ``env``; lost cases are recorded in ``sink``."""

    def __init__(self, config: RunConfig, config_ref, queue, env: dict | None, sink: Sink):
        self.config, self.config_ref, self.queue, self.sink = config, config_ref, queue, sink
        gpus = {} if config.gpus_per_runner is None else {"num_gpus": config.gpus_per_runner}
        self.runner = runner.options(runtime_env=env, **gpus)
        self.careful = careful.options(runtime_env=env, **gpus)
        self.by_generator: dict[ray.ObjectRefGenerator, Runner] = {}
        self.deaths = Deaths()
        self.losses = 0  # runners lost since any runner last reported
        self.next_id = 0

    def __contains__(self, generator: ray.ObjectRefGenerator) -> bool:
        return generator in self.by_generator

    def __getitem__(self, generator: ray.ObjectRefGenerator) -> Runner:
        return self.by_generator[generator]

    def track(self, generator: ray.ObjectRefGenerator, careful: bool = False) -> Runner:
        """Follow the runner (or careful task) whose reports come from ``generator``."""
        self.by_generator[generator] = found = Runner(self.next_id, careful, since=time.monotonic())
        self.next_id += 1
        return found

    def top_up(self) -> None:
        """One runner per worker."""
        for _ in range(self.config.workers - sum(not r.careful for r in self.by_generator.values())):
            self.track(self.runner.remote(self.next_id, self.queue, self.config_ref))

    def start_careful(self, item: Item) -> None:
        self.track(self.careful.remote(item, self.config_ref), careful=True)

    def unready(self) -> int:
        """Runners of the queue that have not begun yet."""
        return sum(not r.careful and not r.ready for r in self.by_generator.values())

    def heard(self, generator: ray.ObjectRefGenerator) -> Runner:
        """A runner reported: it is alive (and the cluster is, whatever was lost before)."""
        found = self.by_generator[generator]
        found.since = time.monotonic()
        self.losses = 0
        return found

    def ended(self, generator: ray.ObjectRefGenerator) -> Runner:
        return self.by_generator.pop(generator)

    def stop(self, generator: ray.ObjectRefGenerator) -> Runner:
        """Cancel a runner's task with force (killing its worker: a plain cancel cannot
        interrupt a C call)."""
        ray.cancel(generator, force=True)
        return self.by_generator.pop(generator)

    def stop_all(self) -> None:
        for generator in self.by_generator:
            ray.cancel(generator, force=True)

    def timed_out(self, now: float) -> list[Chunk]:
        """Stop the runners silent for the timeout in an item (see the module's doc); the chunks
        given up."""
        timeout, given_up = self.config.timeout, []
        for generator, found in list(self.by_generator.items()):
            if timeout is not None and found.item is not None and now - found.since > timeout:
                given_up += self.lost(self.stop(generator), None, timed_out=now - found.since)
        return given_up

    def stop_ids(self, ids: list[int]) -> list[Chunk]:
        """Stop the runners ``ids`` (in a timed-out split case's chunks); the chunks given up."""
        given_up: list[Chunk] = []
        for generator, found in list(self.by_generator.items()):
            if found.id in ids:
                given_up += self.lost(self.stop(generator), None, in_chunk=True)
        return given_up

    def lost(
        self, found: Runner, death: WorkerDeath | None, timed_out: float | None = None, in_chunk: bool = False
    ) -> list[Chunk]:
        """``found`` stopped: its worker died (``death``) or it was silent for ``timed_out``
        seconds (see the module's doc); its unreported work is settled or run again, and a new
        runner replaces it. Returns the split cases' chunks it leaves that ran too often."""
        self.losses += 1
        if self.losses > 2 * self.config.workers + 8:  # every new runner dies at once: the cluster is broken
            raise RuntimeError(f"{self.losses} Ray workers in a row died before reporting anything; last: {death}")
        moved_on, given_up = [], []
        if not found.careful:
            ran, given_up = ray.get(self.queue.chunk_lost.remote(found.id))
            in_chunk = in_chunk or ran
            moved_on = ray.get(self.queue.lost.remote(found.id, found.started))
        self._settle(found, death, timed_out, in_chunk, bool(moved_on))
        for taken in moved_on:  # its start report had not gone out, or went down with it: maybe the culprit
            self.start_careful(dataclasses.replace(taken, careful=True))
        self.top_up()
        return given_up

    def _settle(self, found: Runner, death: WorkerDeath | None, timed_out, in_chunk: bool, moved_on: bool) -> None:
        item, timeout = found.item, self.config.timeout
        unreported = list((found.cases or [])[found.current :])
        rest: list[CaseInfo] = []
        if item is None:
            return
        if item.group is not None and found.cases is None:  # in the listing, or its report went down
            if found.careful and (death is None or death.kind != NODE_LOST):  # listed alone: the listing it is
                what = f"timed out after {timeout:g} s (--timeout)" if death is None else death.message
                self.sink.listed(item.group, group_error(item.group, f"listing the group {what}"))
            else:
                self.start_careful(Item(item.id, group=item.group, careful=True))
        elif death is not None and death.kind == NODE_LOST and unreported:
            exhausted = self.deaths.node_lost([case.key for case in unreported], death)
            given_up = [case for case in unreported if case.key in exhausted]
            self.sink.emit(RecordBatch(CaseRecord(case.id, ERROR, exhausted[case.key], 0.0, 1) for case in given_up))
            rest = [case for case in unreported if case.key not in exhausted]
        elif unreported and found.culprit_known and not moved_on and not in_chunk:
            case, rest = unreported[0], unreported[1:]
            if death is None:
                self.sink.emit(RecordBatch([timeout_record(case, timeout, timed_out)]))
            elif (message := self.deaths.died(case.key, death)) is None:  # a first crash: once more, alone
                self.start_careful(Item(item.id, cases=(case,), careful=True))
            else:
                self.sink.emit(RecordBatch([CaseRecord(case.id, ERROR, message, 0.0, 1)]))
        elif unreported:
            self.start_careful(Item(item.id, cases=tuple(unreported), careful=True))
        if rest:
            self.queue.resubmit.remote([(rest, False)])
