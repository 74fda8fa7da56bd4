"""The work queue (resubmitted work, costly cases, groups, listed cases in batches of one group;
who holds what; split cases' chunks) and the enumeration thread (longest first with durations)."""

from __future__ import annotations

import time

import pytest

from distcheck.runner.default_policy import CostlyRule, DefaultPolicy
from distcheck.runner.options import RunConfig, RunOptions
from distcheck.runner.split.chunks import CHUNK_TRIES, Chunk
from distcheck.runner.work_queue import SOON, WAIT, Enumeration, WorkQueue
from distcheck.storage.durations import Durations, load_durations
from distcheck.suites import CaseId, CaseInfo, GroupInfo, Selection, UsageError
from tests.runner.fake_suite import FakeSuite


def _case(op: str, sample: int, cost: int = 0) -> CaseInfo:
    return CaseInfo(CaseId("s", op, "float64", "grad", sample), fingerprint="fp", cost=cost)


def _group(op: str) -> GroupInfo:
    return GroupInfo("s", op, "float64", ("grad",))


def _name(item) -> str | list[str]:
    if item is None or item == WAIT:
        return item
    if item.group is not None:
        return f"group {item.group.op}"
    return [f"{c.id.op}{c.id.sample}" for c in item.cases]


def _queue(mode: str = "slow", size: int = 3, durations: Durations | None = None) -> WorkQueue:
    """A queue with the default policy (slow mode: cost hints make cases costly)."""
    options = RunOptions(batch_size=size, durations=durations)
    return WorkQueue(DefaultPolicy(RunConfig(options, FakeSuite(mode), Selection(), workers=1)))


def _drain(queue: WorkQueue, runner: int = 0) -> list:
    handed, finished = [], None
    while (item := queue.take(runner, finished)) not in (None, WAIT):
        handed.append(_name(item))
        finished = item.id
    return handed


def test_batches_hold_one_group_and_costly_cases_go_first():
    queue = _queue()
    queue.put([_case("a", k) for k in range(5)] + [_case("b", 0), _case("b", 1, cost=5000), _case("c", 0)])
    queue.close()
    assert _drain(queue) == [["b1"], ["a0", "a1", "a2"], ["a3", "a4"], ["b0"], ["c0"]]
    assert queue.take(0) is None and queue.idle()


def test_without_a_cost_threshold_order_is_kept():
    queue = _queue("fast", size=8)
    queue.put([_case("a", 0), _case("a", 1, cost=5000)])
    assert _drain(queue) == [["a0", "a1"]]


def test_resubmitted_then_costly_then_groups_then_listed():
    queue = _queue(size=4)
    queue.put([_group("g"), _group("h"), _case("a", 0)])
    assert _name(queue.take(0)) == "group g"
    queue.put([_case("g", 0), _case("g", 1, cost=2000), _case("g", 2, cost=9000), _case("g", 3)])
    queue.resubmit([([_case("z", 0), _case("z", 1)], True)])
    items = [queue.take(0) for _ in range(4)]
    assert [_name(item) for item in items] == [["z0", "z1"], ["g2"], ["g1"], "group h"]
    assert items[0].careful and not items[1].careful
    assert _drain(queue) == [["a0"], ["g0", "g3"]]


def test_runners_wait_while_others_hold_work_and_stop_when_all_is_done():
    queue = _queue()
    queue.put([_group("g")])
    queue.close()
    group = queue.take(0)
    assert queue.take(1) == WAIT  # runner 0 may still put the rest of its group back
    queue.put([_case("g", 5)])
    g5 = queue.take(1)
    assert g5.cases.keys == ("s::g::float64::sample5::grad",)
    assert queue.take(0, finished=group.id) == WAIT  # runner 1 still holds g5
    assert queue.take(1, finished=g5.id) is None


def test_the_work_of_a_lost_runner_goes_back_to_the_driver():
    queue = _queue()
    queue.put([_group("g"), _case("a", 0), _case("a", 1), _case("b", 0), _case("c", 0)])
    known = queue.take(7)
    finished = queue.take(7, finished=known.id)  # finished, but its report never reached the driver
    taken = queue.take(7, finished=finished.id)  # taken, and the driver never heard it started
    assert [_name(finished), _name(taken)] == [["a0", "a1"], ["b0"]]
    unreported = queue.lost(7, known.id)
    assert [_name(item) for item in unreported] == [["a0", "a1"], ["b0"]]  # for the driver to run carefully
    queue.resubmit([([_case("g", 1)], False)])  # what the driver knew of the known item
    assert _drain(queue, runner=1) == [["g1"], ["c0"]]
    assert queue.lost(8, None) == [] and queue.idle()


def _chunk(split: int, n: int) -> Chunk:
    return Chunk((split, n))


def test_split_cases_chunks_go_out_first_and_runners_wait_for_them():
    """A split case's chunks come before any other work; while a split case runs, runners with
    nothing to do wait for its chunks instead of stopping."""
    queue = _queue()
    queue.put([_case("a", 0)])
    queue.close()
    queue.open_split(3)
    queue.put_chunks([_chunk(3, 0), _chunk(3, 1)])
    assert [queue.take(0).key, queue.take(1).key] == [(3, 0), (3, 1)]
    a0 = queue.take(0)
    assert _name(a0) == ["a0"]
    assert queue.take(1) == SOON  # split case 3 may add chunks any moment
    assert queue.take(0, finished=a0.id) == SOON
    queue.put_chunks([_chunk(3, 2)])
    assert queue.take(1).key == (3, 2)
    assert queue.end_split(3) == [1]  # runner 1 runs one of its chunks
    queue.put_chunks([_chunk(3, 3)])  # from its coordinator, too late: dropped
    assert queue.take(0) is None and queue.take(1) is None and queue.idle()


def test_a_lost_runners_chunks_not_forwarded_run_again_until_their_last_try():
    """A lost runner's chunks whose results the driver has not forwarded run again (a runner's
    reports not read yet go down with it), those run too often are given up."""
    queue = _queue()
    queue.open_split(0)
    queue.put_chunks([_chunk(0, 0), _chunk(0, 1), _chunk(0, 2)])
    queue.drop_chunks([(0, 2)])  # its results are no longer wanted
    assert queue.take(5).key == (0, 0)
    assert queue.chunk_lost(9) == (False, [])  # runner 9 took no chunk
    assert queue.take(5).key == (0, 1)  # runner 5 has run (0, 0): its result not forwarded yet
    queue.forwarded([(5, (0, 1))])  # (the driver reads a runner's reports in order: a sketch)
    assert queue.chunk_lost(5) == (True, [])  # (0, 0) runs again; (0, 1) was forwarded
    for tries in range(1, CHUNK_TRIES):
        chunk = queue.take(6)
        assert chunk.key == (0, 0) and chunk.tries == tries
        ran, given_up = queue.chunk_lost(6)
        assert ran and (given_up == [] or tries == CHUNK_TRIES - 1)
    assert [c.key for c in given_up] == [(0, 0)] and given_up[0].tries == CHUNK_TRIES - 1
    assert queue.take(7) == SOON  # none left, the split case still runs


def test_durations_order_groups_longest_first(tmp_path):
    report = tmp_path / "report.json"
    report.write_text(
        '{"summary": {}, "cases": ['
        '{"id": "s::g::float64::sample0::grad", "seconds": 0.5},'
        '{"id": "s::h::float64::sample0::grad", "seconds": 3.0},'
        '{"id": "s::h::float64::sample1::grad", "seconds": 9.0}]}'
    )
    durations = load_durations(str(tmp_path))  # a run folder holding report.json
    assert len(durations) == 3 and durations.group_seconds(_group("h")) == 12.0
    enumeration = Enumeration(iter([_group("g"), _case("x", 0), _group("h")]), durations.group_seconds)
    taken = []
    deadline = time.monotonic() + 10
    while not enumeration.over and time.monotonic() < deadline:
        taken += enumeration.take(wait=0.05)
    assert [getattr(item, "op", None) or item.id.op for item in taken] == ["h", "g", "x"]
    queue = _queue("fast", 4, durations)
    queue.put([_group("h"), _group("g")])
    group = queue.take(0)
    rule = group.head.rule
    assert rule.batch_seconds == 12.5 / 4 and rule.durations["s::h::float64::sample1::grad"] == 9.0
    queue.put([_case("h", 0), _case("h", 1), _case("h", 2)])
    assert _drain(queue) == [["h1"], ["h0"], "group g", ["h2"]]
    assert CostlyRule().with_durations(durations, _group("g")).durations == {"s::g::float64::sample0::grad": 0.5}


@pytest.mark.parametrize(
    ("content", "message"),
    [("[1, 2]", "neither a distcheck report"), ("{", "is not JSON"), (None, "cannot read")],
)
def test_bad_durations_files_are_usage_errors(tmp_path, content, message):
    path = tmp_path / "d.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(UsageError, match=message):
        load_durations(str(path))


def test_with_durations_batches_hold_a_shrinking_part_of_the_work():
    seconds = {f"s::a::float64::sample{k}::grad": 0.5 for k in range(40)}
    queue = _queue("fast", 8, Durations(seconds))
    queue.put([_case("a", k) for k in range(40)])  # 20 s of recorded work
    sizes = [len(item) for item in _drain(queue)]
    assert sum(sizes) == 40 and sizes[0] == 10  # 20 s / 4 workers' worth: 5 s, 10 cases
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] == 1  # down to MIN_BATCH_SECONDS


def test_durations_ignore_ids_that_are_not_case_ids():
    assert len(Durations({"nonsense": 1.0, "s::a::float64::sample0::grad": 2.0})) == 1


def test_enumeration_errors_reach_the_dispatching_thread():
    def items():
        yield _case("a", 0)
        raise UsageError("unknown op 'z'")

    enumeration = Enumeration(items())
    with pytest.raises(UsageError, match="unknown op"):
        deadline = time.monotonic() + 10
        while not enumeration.over and time.monotonic() < deadline:
            enumeration.take(wait=0.05)
