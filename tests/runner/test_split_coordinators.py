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
    def __init__(self, queue, inbox, share=None, gpus=None, block_bytes=None):
        self.queue, self.inbox, self.share = queue, inbox, share

    def submit(self, subject, units):
        return types.SimpleNamespace(tasks=len(units))


def _coordinator(monkeypatch, run_case, *share):
    monkeypatch.setattr(split, "queue_executor", _FakeExecutor)
    monkeypatch.setattr(split, "distcheck_checker", lambda executor: executor)
    monkeypatch.setattr(split, "run_case", run_case)
    coordinator = object.__new__(split.Coordinator)  # its suite already loaded
    coordinator.prepared, coordinator.inbox = {"s"}, split.Inbox()
    return coordinator.run(types.SimpleNamespace(name="s"), "case", "fp", Budget(1.0), "queue", 7, None, *share)


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


def test_a_coordinator_cuts_its_case_for_the_share_of_the_workers_it_was_given(monkeypatch):
    def planned(suite, case, fingerprint, budget, executor):
        assert executor._inner.share == 8
        return "outcome"

    run = _coordinator(monkeypatch, planned, 8)
    assert next(run) is None and next(run) == ("outcome", 0)


@pytest.mark.parametrize(
    ("workers", "running", "waiting", "share"),
    [
        (64, 0, 0, 64),  # alone: every worker
        (64, 1, 0, 32),
        (64, 7, 0, 8),  # among eight
        (64, 0, 20, 8),  # the first of many: they will run eight at once
        (64, 3, 1, 12),  # five running then
        (2, 0, 0, 2),
        (2, 1, 0, 1),
        (3, 7, 5, 1),  # never none
    ],
)
def test_a_split_case_is_cut_for_its_share_of_the_workers_while_others_run(workers, running, waiting, share):
    from distcheck.runner.ray_dispatch import split_share

    assert split_share(workers, 8 if workers > 8 else 2, running, waiting) == share


def test_a_split_case_s_executor_plans_for_its_share_never_more_than_the_cluster(monkeypatch):
    from distcheck.executors.ray_executor import RayExecutor
    from distcheck.plan.chunking import Workload

    monkeypatch.setattr(RayExecutor, "cluster_workers", lambda self: 64)
    work = Workload(items=10_000, seconds_per_item=0.01)  # 100 s of columns
    pieces = {
        share: len(split_chunks.queue_executor("queue", split.Inbox(), share=share).policy.timed_chunks(work))
        for share in (None, 8, 1000)
    }
    # the whole cluster: two rounds of one piece per worker; an eighth of it: 7 shrinking rounds
    assert pieces == {None: 128, 8: 56, 1000: 128}


def test_the_driver_starts_split_cases_each_cut_for_its_share(monkeypatch):
    """Three split cases found at once, two coordinators at most on 64 workers: the first two
    start, each cut for half the workers; the third waits, then starts among one other."""
    import collections

    from distcheck.runner import ray_dispatch

    started = []

    class Pool:
        def start(self, suite, case, fingerprint, budget, queue, split_id, gpus, share):
            started.append((case, share))
            return f"generator {case}"

    run = object.__new__(ray_dispatch._Run)
    run.d = types.SimpleNamespace(workers=64, suite="suite", split_budget="budget", gpus_per_runner=None)
    run.queue = types.SimpleNamespace(open_split=types.SimpleNamespace(remote=lambda split_id: None))
    run.coordinators, run.max_splits, run.next_split = Pool(), 2, 0
    run.splits, run.split_ids, run.waiting = {}, {}, collections.deque()
    monkeypatch.setattr(run, "top_up", lambda: None, raising=False)
    for name in ("a", "b", "c"):
        run.waiting.append(ray_dispatch._Split(types.SimpleNamespace(id=name, fingerprint=None)))
    run.start_waiting()
    assert started == [("a", 32), ("b", 32)]
    del run.splits["generator a"]  # its case ended
    run.start_waiting()
    assert started[-1] == ("c", 32)
    run.splits.clear()
    run.waiting.append(ray_dispatch._Split(types.SimpleNamespace(id="d", fingerprint=None)))
    run.start_waiting()
    assert started[-1] == ("d", 64)  # alone


def test_a_slow_run_submits_its_runners_before_it_waits_for_a_coordinator_to_warm(monkeypatch):
    """Ray starts the runners (a worker lease each: seconds for many on busy cores) while the
    driver waits for the coordinator to load the suite, not after."""
    import threading

    from distcheck.runner import ray_dispatch

    order = []
    run = object.__new__(ray_dispatch._Run)
    stop = threading.Event()
    stop.set()  # the loop ends at once, after its start
    budget = types.SimpleNamespace(split_seconds=4.0)
    run.d = types.SimpleNamespace(suite=types.SimpleNamespace(mode="slow"), budget=budget, stop=stop)
    run.coordinators = types.SimpleNamespace(warm=lambda suite: order.append("warm"))
    run.runners, run.splits, run.queue = {}, {}, "queue"
    monkeypatch.setattr(run, "top_up", lambda: order.append("runners"), raising=False)
    monkeypatch.setattr(ray_dispatch.ray, "kill", lambda actor: order.append("queue killed"))
    run.loop()
    assert order == ["runners", "warm", "queue killed"]


def _starting_run(runners: int, careful: int = 0):
    import threading

    from distcheck.runner import ray_dispatch

    run = object.__new__(ray_dispatch._Run)
    run.d = types.SimpleNamespace(stop=threading.Event())
    run.runners = {k: ray_dispatch._Runner(k, careful=k >= runners) for k in range(runners + careful)}
    return run


def test_the_first_dispatch_waits_for_the_runners_to_begin(monkeypatch):
    run = _starting_run(3, careful=1)  # a careful task never says it is ready: not waited for
    heard = []

    def receive():  # one runner begins per look
        runner = next(r for r in run.runners.values() if not r.ready and not r.careful)
        run.on_ready(runner)
        heard.append(runner.id)

    monkeypatch.setattr(run, "receive", receive, raising=False)
    run.await_runners()
    assert heard == [0, 1, 2]


def test_the_first_dispatch_waits_no_more_once_runners_stop_beginning(monkeypatch):
    """A cluster shared with other jobs may start only some runners: after READY_GAP seconds
    without a new one, the work goes to those that began."""
    import time

    from distcheck.runner import ray_dispatch

    run = _starting_run(4)
    run.on_ready(run.runners[0])
    looks = []
    monkeypatch.setattr(run, "receive", lambda: looks.append(time.sleep(0.01)), raising=False)
    monkeypatch.setattr(ray_dispatch, "READY_GAP", 0.1)
    begin = time.monotonic()
    run.await_runners()
    assert 0.1 <= time.monotonic() - begin < 5.0 and looks
    assert [r.ready for r in run.runners.values()] == [True, False, False, False]
    run.d.stop.set()  # a stopped run does not wait at all
    looks.clear()
    run.await_runners()
    assert not looks
