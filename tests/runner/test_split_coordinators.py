"""Split cases on the driver (how many run at once, each cut for its share of the workers; a
coordinator lost before it began), their coordinators (one pool per Ray, a gone one replaced;
a coordinator's run of a case, its chunks run here) and the start of a dispatch (runners begin
while the coordinator warms, no item before they have begun)."""

from __future__ import annotations

import threading
import types

import pytest
import ray

from distcheck.executors.ray_executor import RayExecutor
from distcheck.hash_seed import task_runtime_env
from distcheck.runner import RunOptions, run_suite
from distcheck.runner.messages import Begun, Decided
from distcheck.runner.options import RunConfig
from distcheck.runner.split import coordinator
from distcheck.runner.split.cases import SplitCases, split_share
from distcheck.runner.split.chunks import run_chunk
from distcheck.runner.split.coordinator import DROPPED, Coordinator, Coordinators, Inbox
from distcheck.suites.base import RUN, CaseId, CaseInfo, Selection
from tests.runner.fake_suite import FakeSuite, TracedSuite

GRAD = Selection(checks=("grad",))


def _context(node: str, job: str):
    return types.SimpleNamespace(get_node_id=lambda: node, get_job_id=lambda: job)


def test_a_new_ray_with_the_same_job_id_gets_a_new_pool(monkeypatch):
    # every new Ray's first job is 01000000: a pool kept from the last Ray holds dead actors
    monkeypatch.setattr(coordinator, "_pools", {})
    monkeypatch.setattr(ray, "get_runtime_context", lambda: _context("node-a", "01000000"))
    first = coordinator.coordinators(None)
    assert coordinator.coordinators(None) is first
    monkeypatch.setattr(ray, "get_runtime_context", lambda: _context("node-b", "01000000"))
    assert coordinator.coordinators(None) is not first


class _Actor:
    """A coordinator's handle: ``run.remote`` gives a generator's name, or raises once ``gone``."""

    def __init__(self, made: list):
        made.append(self)
        self.number, self.gone = len(made), False
        self.run = types.SimpleNamespace(remote=self._run)

    def _run(self, *args):
        if self.gone:
            raise RuntimeError("Can't find actor: it might be dead or it's from a different cluster")
        return f"generator {self.number}"


def test_an_idle_coordinator_that_is_gone_is_replaced():
    made: list[_Actor] = []
    pool = Coordinators(None, start=lambda suite: _Actor(made))
    suite = FakeSuite("slow")
    first = pool.start(suite, "config", "case", "queue", 0, 2)
    pool.done(first)  # idle again, kept
    assert pool.start(suite, "config", "case", "queue", 1, 2) == first and len(made) == 1
    pool.done(first)
    made[0].gone = True  # its node (or its cluster) went
    second = pool.start(suite, "config", "case", "queue", 2, 2)
    assert second == "generator 2" and pool.actor(second) is made[1]


def test_an_inbox_drops_what_an_earlier_case_left_and_wakes_who_waits_for_a_dropped_chunk():
    inbox = Inbox()
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
    assert got == [DROPPED]
    inbox.deliver(second, ["too late"])  # dropped stays dropped
    assert not inbox.arrived(second)


class _InlineQueue:
    """The work queue as a coordinator sees it, its chunks run at once in this process and their
    results delivered to ``coordinator``."""

    def __init__(self, coordinator_: Coordinator):
        self.keys: list[tuple[int, int]] = []
        self.put_chunks = types.SimpleNamespace(remote=self._run)
        self.drop_chunks = types.SimpleNamespace(remote=lambda keys: None)
        self.coordinator = coordinator_

    def _run(self, chunks) -> None:
        for chunk in chunks:
            self.keys.append(chunk.key)
            self.coordinator.deliver([(chunk.key, [ray.put(run_chunk(chunk))])])


@pytest.mark.ray
def test_a_coordinator_says_when_it_begins_then_gives_the_record_of_its_case_checked_in_chunks(ray_cluster, tmp_path):
    suite = FakeSuite("slow", ops=("big", "wrong", "nobuild"), marks=str(tmp_path))  # big: 2 ms an evaluation
    config = RunConfig(RunOptions(split_seconds=0.0), suite, GRAD, blocks=None)
    made = Coordinator(suite)  # the actor's class, here in this process
    for op, verdict in (("big", "pass"), ("wrong", "fail"), ("nobuild", "error")):
        case = CaseInfo(CaseId("fake", op, "float64", "grad", 0), RUN, "", f"fp-{op}")
        queue = _InlineQueue(made)
        run = made.run(config, case, queue, 7, 2)
        assert type(next(run)) is Begun  # begun: its timeout runs from now
        decided = next(run)
        assert type(decided) is Decided and decided.record.id == str(case.id)
        assert decided.record.verdict == verdict and decided.record.tasks == len(queue.keys)
        assert all(split == 7 for split, _ in queue.keys)  # its chunks' keys: the case's id in the queue
        assert (len(queue.keys) > 1) == (op == "big")  # a case that cannot be rebuilt ends before any chunk


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
    assert split_share(workers, 8 if workers > 8 else 2, running, waiting) == share


def test_a_split_case_s_executor_plans_for_its_share_never_more_than_the_cluster(monkeypatch):
    monkeypatch.setattr(RayExecutor, "cluster_workers", lambda self: 64)
    lone, eighth, beyond = (RayExecutor(share=share).policy for share in (None, 8, 1000))
    assert (lone.workers, lone.cluster) == (64, 0)
    assert (eighth.workers, eighth.cluster) == (8, 64) and eighth.rounds() > lone.rounds()  # shrinking rounds
    assert beyond.workers == 64


class _Pool:
    """Coordinators that start nothing: the cases started and the share each was cut for."""

    def __init__(self):
        self.started: list[tuple[str, int]] = []
        self.killed: list[str] = []

    def start(self, suite, config_ref, case, queue, split_id, share):
        self.started.append((case.id, share))
        return f"generator {case.id}"

    def done(self, generator, failed=False):
        pass

    def kill(self, generator):
        self.killed.append(generator)


class _Queue:
    def __init__(self):
        for method in ("open_split", "end_split", "forwarded"):
            setattr(self, method, types.SimpleNamespace(remote=lambda *args: None))


class _Sink:
    def __init__(self):
        self.records = []

    def emit(self, batch):
        self.records += batch.records()


def _split_cases(workers: int) -> tuple[SplitCases, _Pool, _Sink]:
    config = RunConfig(RunOptions(), FakeSuite("slow"), GRAD, workers=workers)
    pool, sink = _Pool(), _Sink()
    return SplitCases(config, "config", _Queue(), pool, sink), pool, sink


def _case(name: str) -> CaseInfo:
    return CaseInfo(CaseId("fake", name, "float64", "grad", 0), RUN, "", "fp")


def test_the_driver_starts_split_cases_each_cut_for_its_share():
    """Three split cases found at once, two at most on 16 workers: the first two start, each cut
    for half the workers; the third waits, then starts among one other; alone, it has all."""
    splits, pool, _ = _split_cases(16)
    for name in ("a", "b", "c"):
        splits.add(_case(name))
    assert splits.start_waiting()
    assert [share for _, share in pool.started] == [8, 8] and splits.active
    splits.ended(f"generator {_case('a').id}", None)  # its case ended
    assert splits.start_waiting() and pool.started[-1] == (_case("c").id, 8)
    splits.ended(f"generator {_case('b').id}", None)
    splits.ended(f"generator {_case('c').id}", None)
    splits.add(_case("d"))
    assert splits.start_waiting() and pool.started[-1] == (_case("d").id, 16)
    assert not splits.start_waiting()  # none waiting


def test_a_split_case_whose_coordinator_dies_before_it_begins_goes_to_another_then_errs():
    splits, pool, sink = _split_cases(4)
    splits.add(_case("a"))
    splits.start_waiting()
    for _ in range(2):  # coordinators kept from an earlier run, gone: not the case's doing
        splits.ended(f"generator {_case('a').id}", ray.exceptions.RayActorError())
        assert splits.start_waiting() and not sink.records
    splits.ended(f"generator {_case('a').id}", ray.exceptions.RayActorError())
    (record,) = sink.records
    assert record.verdict == "error" and record.message.startswith("the split case stopped: ")
    splits.add(_case("b"))
    splits.start_waiting()
    splits.begun(f"generator {_case('b').id}")
    splits.ended(f"generator {_case('b').id}", ray.exceptions.RayActorError())  # begun: its error
    assert [r.case.op for r in sink.records] == ["a", "b"] and not splits.active


def _fresh_coordinators() -> None:
    """No idle coordinator kept from an earlier test: the next slow run warms a new one."""
    coordinator.coordinators(task_runtime_env(ray.get_runtime_context().runtime_env)).close_idle()


@pytest.mark.ray
def test_a_slow_run_s_runners_begin_while_its_coordinator_warms(ray_cluster, tmp_path):
    """Ray starts the runners (a worker lease each: seconds for many on busy cores) while the
    coordinator loads the suite, not after."""
    _fresh_coordinators()
    suite = TracedSuite("fake-warm", str(tmp_path), nap=2.0, mode="slow", ops=("sin",))
    result = run_suite(suite, GRAD, RunOptions(timeout=120))
    assert [r.verdict for r in result.records] == ["pass"]
    prepared, _ = suite.traced()
    warmed = [ended for role, _, ended in prepared if role == "actor"]
    runners = [began for role, began, _ in prepared if role == "task"]
    assert warmed and runners and min(runners) < min(warmed)


@pytest.mark.ray
def test_the_first_dispatch_waits_for_the_runners_to_begin(ray_cluster, tmp_path):
    """One runner begins at once, the other a second and a half later: no group is listed
    before both have begun."""
    suite = TracedSuite("fake-begin", str(tmp_path), nap=1.5, first_nap=0.0, ops=("sin", "wrong"))
    result = run_suite(suite, GRAD, RunOptions(timeout=120))
    assert [r.verdict for r in result.records] == ["pass", "fail"]
    prepared, listed = suite.traced()
    assert len(prepared) == result.workers and listed
    assert max(ended for _, _, ended in prepared) <= listed[0]


@pytest.mark.ray
def test_the_first_dispatch_waits_no_more_once_runners_stop_beginning(ray_cluster, tmp_path, monkeypatch):
    """A cluster shared with other jobs may start only some runners: once no runner has begun
    for READY_GAP seconds, the work goes to those that began."""
    from distcheck.runner import dispatch

    monkeypatch.setattr(dispatch, "READY_GAP", 0.5)
    suite = TracedSuite("fake-gap", str(tmp_path), nap=0.0, first_nap=8.0, ops=("sin",))
    result = run_suite(suite, GRAD, RunOptions(timeout=120))
    assert [r.verdict for r in result.records] == ["pass"]
    prepared, listed = suite.traced()
    assert listed and listed[0] < max(ended for _, _, ended in prepared)  # before the slow one began
