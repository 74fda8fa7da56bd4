"""The feed: cases enumerated in the background, handed out in batches of one group."""

from __future__ import annotations

import time

import pytest

from distcheck.runner.feed import Feed
from distcheck.suites import CaseId, CaseInfo, UsageError


def _case(op: str, sample: int, cost: int = 0) -> CaseInfo:
    return CaseInfo(CaseId("s", op, "float64", "grad", sample), fingerprint="fp", cost=cost)


def _drain(feed: Feed, size: int) -> list[list[str]]:
    batches = []
    deadline = time.monotonic() + 10
    while not feed.done and time.monotonic() < deadline:
        batch = feed.batch(size, wait=0.05)
        if batch:
            batches.append([f"{c.id.op}{c.id.sample}" for c in batch])
    return batches


def test_batches_hold_one_group_and_costly_cases_go_first():
    cases = [_case("a", k) for k in range(5)] + [_case("b", 0), _case("b", 1, cost=5000), _case("c", 0)]
    feed = Feed(iter(cases), costly=1000)
    time.sleep(0.2)
    assert feed.enumerated and not feed.done
    assert _drain(feed, size=3) == [["b1"], ["a0", "a1", "a2"], ["a3", "a4"], ["b0"], ["c0"]]


def test_without_a_cost_threshold_order_is_kept():
    cases = [_case("a", 0), _case("a", 1, cost=5000)]
    assert _drain(Feed(iter(cases)), size=8) == [["a0", "a1"]]


def test_enumeration_errors_reach_the_dispatching_thread():
    def cases():
        yield _case("a", 0)
        raise UsageError("unknown op 'z'")

    with pytest.raises(UsageError, match="unknown op"):
        _drain(Feed(cases()), size=4)
