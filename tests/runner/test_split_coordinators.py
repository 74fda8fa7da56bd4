"""The pools of split-case coordinators: one per Ray, never a stale one from an earlier Ray."""

from __future__ import annotations

import threading
import types

import pytest
import ray

from distcheck.runner import chunks as split_chunks
from distcheck.runner import split
from distcheck.runner.budget import Budget


def _context(node: str, job: str):
    return types.SimpleNamespace(get_node_id=lambda: node, get_job_id=lambda: job)


def test_a_new_ray_with_the_same_job_id_gets_a_new_pool(monkeypatch):
    # every new Ray's first job is 01000000: a pool kept from the last Ray holds dead actors
    monkeypatch.setattr(split, "_pools", {})
    monkeypatch.setattr(ray, "get_runtime_context", lambda: _context("node-a", "01000000"))
    first = split.coordinators(None)
    assert split.coordinators(None) is first
    monkeypatch.setattr(ray, "get_runtime_context", lambda: _context("node-b", "01000000"))
    assert split.coordinators(None) is not first


def test_an_idle_coordinator_that_is_gone_is_replaced(monkeypatch):
    class Gone:
        class run:  # noqa: N801 (an actor method's shape)
            @staticmethod
            def remote(*args):
                raise RuntimeError("Can't find actor: it might be dead or it's from a different cluster")

    class Fresh:
        class run:  # noqa: N801
            @staticmethod
            def remote(*args):
                return "generator"

    pool = split.Coordinators(None)
    pool._idle = [Gone()]
    monkeypatch.setattr(pool, "_actor", types.SimpleNamespace(remote=lambda suite: Fresh()))
    assert pool.start(None, None, None, None, None) == "generator"
    assert pool._idle == [] and isinstance(pool._busy["generator"], Fresh)


class _FakeExecutor:
    def __init__(self, queue, inbox, gpus=None, block_bytes=None):
        self.queue, self.inbox = queue, inbox

    def submit(self, subject, units):
        return types.SimpleNamespace(tasks=len(units))


def _coordinator(monkeypatch, run_case):
    monkeypatch.setattr(split, "QueueExecutor", _FakeExecutor)
    monkeypatch.setattr(split, "distcheck_checker", lambda executor: executor)
    monkeypatch.setattr(split, "run_case", run_case)
    coordinator = object.__new__(split.Coordinator)  # its suite already loaded
    coordinator.prepared, coordinator.inbox = {"s"}, split.Inbox()
    return coordinator.run(types.SimpleNamespace(name="s"), "case", "fp", Budget(1.0), "queue", 7)


def test_a_coordinator_says_when_it_begins_then_gives_the_outcome_and_its_chunks(monkeypatch):
    def chunked(suite, case, fingerprint, budget, executor):
        assert executor._inner.inbox.key() == (7, 0)  # its chunks' keys: the case's id in the queue
        executor.submit(None, [1, 2, 3])
        return "outcome"

    run = _coordinator(monkeypatch, chunked)
    assert next(run) is None  # begun: its timeout runs from now
    assert next(run) == ("outcome", 3)


def test_a_case_that_ends_before_any_chunk_gives_its_outcome_and_its_error_is_raised(monkeypatch):
    run = _coordinator(monkeypatch, lambda *args: "skipped early")
    assert next(run) is None and next(run) == ("skipped early", 0)

    def broken(*args):
        raise ValueError("rebuilding the case failed")

    run = _coordinator(monkeypatch, broken)
    assert next(run) is None
    with pytest.raises(ValueError, match="rebuilding the case failed"):
        next(run)


def test_an_inbox_drops_what_an_earlier_case_left_and_wakes_who_waits_for_a_dropped_chunk():
    inbox = split.Inbox()
    inbox.begin(1)
    first = inbox.key()
    inbox.begin(2)
    second = inbox.key()
    inbox.deliver(first, ["late"])  # a chunk of case 1, which has ended
    assert not inbox.arrived(first)
    got = []
    waiter = threading.Thread(target=lambda: got.append(inbox.wait(second)))
    waiter.start()
    inbox.drop([second])
    waiter.join(10)
    assert got == [split_chunks.DROPPED]
    inbox.deliver(second, ["too late"])  # dropped stays dropped
    assert not inbox.arrived(second)
