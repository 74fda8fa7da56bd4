"""The pools of split-case coordinators: one per Ray, never a stale one from an earlier Ray."""

from __future__ import annotations

import types

import ray

from distcheck.runner import split


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
