"""Runners stop for split cases' chunks by count: the dispatcher's accounting of the slots owed
to queued chunks, over a work queue in this process (no Ray: runners are ids that ask it)."""

from __future__ import annotations

import collections
import itertools
import types

from distcheck.runner import ray_dispatch
from distcheck.runner.default_policy import DefaultPolicy
from distcheck.runner.feed import WAIT, WorkQueue
from distcheck.runner.policy import PolicyContext
from distcheck.runner.split import Chunks
from distcheck.suites import CaseId, CaseInfo


def _case(k: int) -> CaseInfo:
    return CaseInfo(CaseId("s", "a", "float64", "grad", k), fingerprint="fp")


class _Actor:
    """A queue called as the driver calls its actor: ``queue.pause.remote(n)``."""

    def __init__(self, queue: WorkQueue):
        self.queue = queue

    def __getattr__(self, name: str):
        return types.SimpleNamespace(remote=getattr(self.queue, name))


class _Dispatch:
    """A ``_Run`` of ``workers`` runners over a queue of ``cases`` one-case batches; ``alive``:
    the runners started and not stopped."""

    def __init__(self, monkeypatch, workers: int, cases: int = 1000):
        monkeypatch.setattr(ray_dispatch.ray, "get", lambda ref: ref)  # the queue's answers, here
        self.queue = WorkQueue(DefaultPolicy(PolicyContext("fast", workers, None, 1)))
        self.queue.put([_case(k) for k in range(cases)])
        self.ids = itertools.count()
        self.alive: set[int] = set()
        run = object.__new__(ray_dispatch._Run)
        run.d = types.SimpleNamespace(workers=workers)
        run.queue = _Actor(self.queue)
        run.splits, run.waiting, run.max_splits = {}, collections.deque(), 2
        run.owed = run.losses = 0
        run.coordinators = types.SimpleNamespace(done=lambda generator, failed=False: None)
        run.start_runner = lambda: self.alive.add(next(self.ids))
        self.run = run
        for _ in range(workers):
            run.start_runner()

    def split(self, chunks: int) -> object:
        """A split case whose coordinator has queued ``chunks`` chunk tasks (its news read)."""
        news = iter([None, Chunks(chunks)])
        self.run.splits[news] = ray_dispatch._Split(_case(-1))
        self.run.receive_split(news)  # begun
        self.run.receive_split(news)  # its chunks are queued
        self.run.resume()
        return news

    def end(self, split: object) -> None:
        del self.run.splits[split]
        self.run.resume()

    def ask(self) -> int:
        """Every runner asks for work once: how many stopped."""
        stopped = 0
        for runner in sorted(self.alive):
            item = self.queue.take(runner)
            assert item != WAIT
            if item is None:
                self.alive.discard(runner)
                stopped += 1
        return stopped


def test_a_split_case_stops_as_many_runners_as_it_queued_chunks(monkeypatch):
    d = _Dispatch(monkeypatch, workers=8)
    split = d.split(chunks=3)
    assert d.run.owed == 3 and d.ask() == 3 and len(d.alive) == 5
    assert d.ask() == 0  # the others go on taking work
    d.end(split)  # its slots get new runners
    assert d.run.owed == 0 and len(d.alive) == 8 and d.ask() == 0


def test_several_split_cases_owe_their_chunks_together_at_most_every_slot(monkeypatch):
    d = _Dispatch(monkeypatch, workers=8)
    small = d.split(chunks=3)
    assert d.ask() == 3
    large = d.split(chunks=20)  # more chunks than runners: every runner stops
    assert d.run.owed == 8 and d.ask() == 5 and not d.alive
    d.end(small)  # the large one still needs every slot
    assert d.run.owed == 8 and not d.alive
    d.end(large)
    assert len(d.alive) == 8 and d.ask() == 0


def test_a_split_case_that_ends_before_its_runners_stopped(monkeypatch):
    d = _Dispatch(monkeypatch, workers=8)
    split = d.split(chunks=4)
    assert d.queue.take(0) is None  # one runner stopped, three stops not served yet
    d.alive.discard(0)
    d.end(split)
    assert len(d.alive) == 8 and d.ask() == 0  # one runner in the slot given back; no stop left


def test_a_runner_lost_while_stops_are_owed_leaves_its_slot_to_the_chunks(monkeypatch):
    d = _Dispatch(monkeypatch, workers=8)
    split = d.split(chunks=2)
    d.alive.discard(0)
    d.run.lost(ray_dispatch._Runner(0), None)  # its slot serves one stop: not replaced
    assert len(d.alive) == 7 and d.ask() == 1 and len(d.alive) == 6
    d.end(split)
    assert len(d.alive) == 8
    d.alive.discard(1)
    d.run.lost(ray_dispatch._Runner(1), None)  # no split case: replaced at once
    assert len(d.alive) == 8 and d.ask() == 0


def test_a_lost_careful_task_is_not_replaced_by_a_runner(monkeypatch):
    d = _Dispatch(monkeypatch, workers=2)
    d.run.lost(ray_dispatch._Runner(99, careful=True), None)  # it took no slot of a runner
    assert len(d.alive) == 2


def test_work_given_back_after_all_was_done_finds_runners_again(monkeypatch):
    d = _Dispatch(monkeypatch, workers=2, cases=0)
    d.queue.close()
    assert d.ask() == 2 and not d.alive  # all done: the runners end
    d.queue.resubmit([([_case(0)], False)])  # what a careful task did not report, given back
    d.run.lost(ray_dispatch._Runner(99, careful=True), None)
    assert len(d.alive) == 2
