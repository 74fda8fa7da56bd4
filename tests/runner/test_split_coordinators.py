"""The pools of split-case coordinators: one per Ray, never a stale one from an earlier Ray."""

from __future__ import annotations

import threading
import types

import pytest
import ray

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
    def __init__(self, gpus=None, block_bytes=None):
        pass

    def submit(self, subject, units):
        return types.SimpleNamespace(tasks=len(units))


def _coordinator(monkeypatch, run_case):
    monkeypatch.setattr(split, "RayExecutor", _FakeExecutor)
    monkeypatch.setattr(split, "distcheck_checker", lambda executor: executor)
    monkeypatch.setattr(split, "run_case", run_case)
    coordinator = object.__new__(split.Coordinator)  # its suite already loaded
    coordinator.prepared = {"s"}
    return coordinator.run(types.SimpleNamespace(name="s"), "case", "fp", Budget(1.0))


def test_a_coordinator_says_when_its_chunks_are_queued_while_its_case_waits_for_them(monkeypatch):
    """The driver stops the runners on that news, not when the coordinator begins (it plans
    first: seconds in which stopped runners would leave the cluster idle)."""
    release = threading.Event()

    def waits_for_its_chunks(suite, case, fingerprint, budget, executor):
        executor.submit(None, [1, 2, 3])
        assert release.wait(30)
        return "outcome"

    run = _coordinator(monkeypatch, waits_for_its_chunks)
    assert next(run) is None  # begun
    assert next(run) == split.CHUNKS  # its chunks are queued, the case still running
    release.set()
    assert next(run) == ("outcome", 3)


def test_a_case_that_ends_before_any_chunk_sends_no_news_and_its_error_is_raised(monkeypatch):
    run = _coordinator(monkeypatch, lambda *args: "skipped early")
    assert next(run) is None and next(run) == ("skipped early", 0)

    def broken(*args):
        raise ValueError("rebuilding the case failed")

    run = _coordinator(monkeypatch, broken)
    assert next(run) is None
    with pytest.raises(ValueError, match="rebuilding the case failed"):
        next(run)
