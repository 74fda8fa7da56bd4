"""The runner on Ray: batches streamed back, timeouts that kill a blocked worker, split cases,
fingerprints checked, the same verdicts as serial."""

from __future__ import annotations

import os
import sys
import time

import pytest

from distcheck.runner import RunOptions, run_suite
from distcheck.runner.split.chunks import CHUNK_TRIES
from distcheck.suites import Selection, get_suite
from tests.runner import fake_suite
from tests.runner.fake_suite import FakeSuite, UngroupedFakeSuite

pytestmark = pytest.mark.ray


def _verdicts(result):
    return {r.id: r.verdict for r in result.records}


def test_verdicts_match_serial(ray_cluster):
    suite = FakeSuite(ops=("sin", "wrong", "crash", "mismatch", "nobuild", "skipped", "xfail"), samples=3)
    selection = Selection(checks=("grad", "gradgrad"))
    on_ray = run_suite(suite, selection, RunOptions(timeout=60, batch_size=2))
    serial = run_suite(suite, selection, RunOptions(serial=True, timeout=60))
    assert on_ray.executor == "ray" and on_ray.workers >= 1
    assert _verdicts(on_ray) == _verdicts(serial)
    assert [r.id for r in on_ray.records] == [r.id for r in serial.records]
    mismatch = next(r for r in on_ray.records if r.case.op == "mismatch")
    assert mismatch.verdict == "error" and "fingerprint fp-other" in mismatch.message


def test_workers_run_with_the_fixed_hash_seed(ray_cluster):
    (record,) = run_suite(FakeSuite(ops=("hashseed",)), Selection(checks=("grad",))).records
    assert record.verdict == "pass", record.message


def test_timeout_kills_a_blocked_worker_and_the_batch_goes_on(ray_cluster, monkeypatch):
    """Sample 0 blocks in a C call: its task is cancelled with force (the worker dies), the
    case is reported ``timeout`` and the rest of its batch is resubmitted."""
    monkeypatch.setattr(fake_suite, "SLEEP", 120.0)
    suite = FakeSuite(ops=("block", "sin"), samples=3)
    result = run_suite(suite, Selection(checks=("grad",)), RunOptions(timeout=3, batch_size=8))
    verdicts = _verdicts(result)
    assert verdicts.pop("fake::block::float64::sample0::grad") == "timeout"
    assert set(verdicts.values()) == {"pass"} and len(verdicts) == 5
    blocked = result.records[0]
    # stopped at its timeout, not when its C call returned
    assert 3 <= blocked.seconds < fake_suite.SLEEP and "stopped after 3 s" in blocked.message


@pytest.mark.parametrize("odd", [1, 4])
def test_timeout_blames_the_stuck_case_of_a_batch_that_reports_in_bulk(ray_cluster, odd):
    """Quick cases report together: when the batch goes silent, the stuck one is found by
    running its unreported cases again, reporting one by one; only that one times out."""
    suite = FakeSuite(ops=("block",), samples=5, odd=odd)
    result = run_suite(suite, Selection(checks=("grad",)), RunOptions(timeout=3, batch_size=8))
    verdicts = _verdicts(result)
    assert verdicts.pop(f"fake::block::float64::sample{odd}::grad") == "timeout"
    assert set(verdicts.values()) == {"pass"} and len(verdicts) == 4


@pytest.mark.parametrize("odd", [0, 2])
def test_a_worker_that_dies_is_blamed_on_its_case_only(ray_cluster, odd):
    suite = FakeSuite(ops=("die", "sin"), samples=4, odd=odd)
    result = run_suite(suite, Selection(checks=("grad",)), RunOptions(timeout=60, batch_size=8))
    verdicts = _verdicts(result)
    dead = result.records[odd]
    assert dead.id == f"fake::die::float64::sample{odd}::grad"
    assert dead.verdict == "error" and "the worker running this case crashed" in dead.message, dead.message
    assert "crashed again (reproduced)" in dead.message
    del verdicts[dead.id]
    assert set(verdicts.values()) == {"pass"} and len(verdicts) == 7


def test_a_case_in_an_item_begun_without_a_report_is_blamed_not_the_item_before(ray_cluster, monkeypatch):
    """A runner tells of an item it starts with its next report. Batches [0, 1] (the share of
    the runner that listed them), [2, 3], [4] (timeout 3 s: a report every 0.75 s): sample 0 or
    2 naps 1 s and is reported, sample 1 or 3 passes at once unreported, and the runner takes
    the next batch without a report and blocks in sample 4. The driver has heard of all but the
    last case of the earlier batch, but the queue knows the runner moved on: sample 4 is the
    one that times out, not the unreported one before it."""
    monkeypatch.setattr(fake_suite, "SLEEP", 120.0)
    suite = FakeSuite(ops=("stall",), samples=5, odd=4)
    result = run_suite(suite, Selection(checks=("grad",)), RunOptions(timeout=3, batch_size=2))
    verdicts = _verdicts(result)
    assert verdicts.pop("fake::stall::float64::sample4::grad") == "timeout"
    assert set(verdicts.values()) == {"pass"} and len(verdicts) == 4


def test_large_case_is_split_into_jacobian_chunks(ray_cluster):
    suite = FakeSuite("slow", ops=("big", "sin"))
    result = run_suite(suite, Selection(checks=("grad",)), RunOptions(timeout=120, split_seconds=0.01))
    big, small = result.records
    assert big.verdict == "pass" and big.tasks > 1, big
    assert big.estimate["columns"] == 3000
    assert small.verdict == "pass"


def test_a_lone_split_case_runs_its_chunks_in_every_runner(ray_cluster, tmp_path):
    """The only case of a run splits: the other runners, and the one that found it, ran out of
    work before the queue heard of the split case and ended; new runners take its chunks."""
    suite = FakeSuite("slow", ops=("big",), marks=str(tmp_path))
    result = run_suite(suite, Selection(checks=("grad",)), RunOptions(timeout=60, split_seconds=0.01))
    (big,) = result.records
    assert big.verdict == "pass" and big.tasks > 1, big
    assert len(os.listdir(tmp_path)) >= 2  # processes that ran chunks


def test_split_case_timeout_cancels_its_tasks(ray_cluster, tmp_path):
    """The split case's coordinator and its chunks stop: no evaluation happens after the run."""
    suite = FakeSuite("slow", ops=("drag", "sin"), marks=str(tmp_path))
    result = run_suite(suite, Selection(checks=("grad",)), RunOptions(timeout=3, split_seconds=1.0))
    drag, sin = result.records
    assert drag.verdict == "timeout" and drag.tasks >= 1 and drag.estimate is None
    assert sin.verdict == "pass"
    time.sleep(1.0)  # an evaluation that had started when the chunks were stopped
    evaluations = len(list(tmp_path.iterdir()))
    assert evaluations > 2  # the chunks had started
    time.sleep(2.0)
    assert len(list(tmp_path.iterdir())) == evaluations


def test_a_chunk_whose_runner_died_runs_again(ray_cluster, tmp_path):
    """A split case's chunks run in the runners: one that ends its runner's process (here the
    first time only) runs again in another, and the case gets its verdict, blamed on no case."""
    marker = str(tmp_path / "bigdie")
    suite = FakeSuite("slow", ops=("bigdie", "sin"), samples=2, marker=marker)
    result = run_suite(suite, Selection(checks=("grad",)), RunOptions(timeout=120, split_seconds=0.1))
    assert os.path.exists(f"{marker}-died")  # a chunk ended its runner
    verdicts = {r.id: (r.verdict, r.tasks > 1) for r in result.records}
    assert verdicts == {
        **{f"fake::bigdie::float64::sample{k}::grad": ("pass", True) for k in range(2)},
        **{f"fake::sin::float64::sample{k}::grad": ("pass", False) for k in range(2)},
    }


def test_a_chunk_that_ends_every_runner_it_runs_in_is_given_up(ray_cluster):
    suite = FakeSuite("slow", ops=("bigdie", "sin"))
    result = run_suite(suite, Selection(checks=("grad",)), RunOptions(timeout=120, split_seconds=0.1))
    bigdie, sin = result.records
    assert bigdie.verdict == "error" and f"the chunk's runner was lost {CHUNK_TRIES} times" in bigdie.message
    assert sin.verdict == "pass"


def test_split_cases_run_at_once_beside_batches(ray_cluster):
    suite = FakeSuite("slow", ops=("big", "sin"), samples=3)
    # big's estimates are 0.4 s and more, sin's under a millisecond: 0.1 s splits the one and
    # never the other, even when a first evaluation of sin is slow on a loaded machine
    result = run_suite(suite, Selection(checks=("grad",)), RunOptions(timeout=120, split_seconds=0.1))
    verdicts = {r.id: (r.verdict, r.tasks > 1) for r in result.records}
    assert verdicts == {
        **{f"fake::big::float64::sample{k}::grad": ("pass", True) for k in range(3)},
        **{f"fake::sin::float64::sample{k}::grad": ("pass", False) for k in range(3)},
    }


def test_a_group_that_cannot_be_listed_is_an_error_per_check_kind(ray_cluster):
    suite = FakeSuite(ops=("nolist", "dielist", "sin"), samples=2)
    result = run_suite(suite, Selection(checks=("grad", "gradgrad")), RunOptions(timeout=60))
    verdicts = {r.id: r.verdict for r in result.records}
    assert verdicts == {
        "fake::nolist::float64::grad": "error",
        "fake::nolist::float64::gradgrad": "error",
        "fake::dielist::float64::grad": "error",
        "fake::dielist::float64::gradgrad": "error",
        **{f"fake::sin::float64::sample{k}::{c}": "pass" for c in ("grad", "gradgrad") for k in range(2)},
    }
    messages = {r.case.op: r.message for r in result.records}
    assert "listing the group failed: RuntimeError: no samples today" in messages["nolist"]
    assert "listing the group the worker running this case crashed" in messages["dielist"]  # found listing alone


def test_a_suite_without_groups_is_enumerated_on_the_driver(ray_cluster):
    suite = UngroupedFakeSuite(ops=("sin", "wrong", "skipped"), samples=2)
    selection = Selection(checks=("grad",))
    on_ray = run_suite(suite, selection, RunOptions(timeout=60, batch_size=1))
    assert _verdicts(on_ray) == _verdicts(run_suite(FakeSuite(ops=("sin", "wrong", "skipped"), samples=2), selection))
    assert _verdicts(on_ray) == {
        "fake::sin::float64::sample0::grad": "pass",
        "fake::sin::float64::sample1::grad": "pass",
        "fake::wrong::float64::sample0::grad": "fail",
        "fake::wrong::float64::sample1::grad": "pass",
        "fake::skipped::float64::grad": "skipped",
    }


def test_memory_budget_on_ray(ray_cluster):
    suite = FakeSuite("slow", ops=("big",))
    (record,) = run_suite(suite, Selection(checks=("grad",)), RunOptions(max_jacobian_mb=1)).records
    assert record.verdict == "skipped" and "3,000 × 3,000" in record.message


def test_torch_opinfo_on_ray(ray_cluster):
    selection = Selection(checks=("grad", "gradgrad"), ops=("linalg.det", "cdist"), dtypes=("float64",))
    result = run_suite(get_suite("torch-opinfo"), selection, RunOptions(max_cases=40, batch_size=8))
    assert len(result.records) == 40 and not result.failed
    verdicts = [r.verdict for r in result.records]
    assert set(verdicts) <= {"pass", "skipped"} and verdicts.count("pass") >= 30, verdicts


def test_torch_opinfo_split_case(ray_cluster):
    """A real op, split: its function and samples travel to the workers by op name."""
    suite = get_suite("torch-opinfo", "slow")
    selection = Selection(checks=("grad", "gradgrad"), ops=("cumsum",), dtypes=("complex128",), substring="::sample0::")
    result = run_suite(suite, selection, RunOptions(split_seconds=0.0))
    assert [r.verdict for r in result.records] == ["pass", "pass"]
    assert all(r.estimate is not None for r in result.records)


class _FakeQueue:
    """The queue actor's two methods, for a runner called as a plain generator: items in order."""

    def __init__(self, ray, items):
        self.items, self.taken = list(items), 0
        self.take = type("take", (), {"remote": lambda _, runner, finished: ray.put(self._next())})()
        self.put = type("put", (), {"remote": lambda _, work: None})()

    def _next(self):
        self.taken += 1
        return self.items.pop(0) if self.items else None


def test_a_runner_reports_a_case_to_split_at_once_not_after_its_next_item(ray_cluster):
    """The driver starts a split case's coordinator when it hears of it: a runner that found
    one must not sit on it while it runs the next item (reports otherwise wait for
    ``report_every`` seconds of work)."""
    from distcheck.runner.messages import Finished, Ready, Started
    from distcheck.runner.options import RunConfig
    from distcheck.runner.policy import Item
    from distcheck.runner.worker import runner
    from distcheck.suites.base import RUN, CaseId, CaseInfo

    suite = FakeSuite("slow", ops=("drag", "sin"))
    info = lambda op: CaseInfo(CaseId("fake", op, "float64", "grad", 0), RUN, "", f"fp-{op}")  # noqa: E731
    queue = _FakeQueue(ray_cluster, [Item(0, cases=(info("drag"),)), Item(1, cases=(info("sin"),))])
    # drag's estimate is tens of seconds (its evaluations sleep 0.2 s), sin's well under a
    # millisecond: a threshold of 1 s splits the one and never the other, however loaded the
    # machine (at 0.01 s, one slow first evaluation of sin split it too)
    config = RunConfig(RunOptions(split_seconds=1.0), suite, Selection())
    reports = [(queue.taken, report) for report in runner._function(0, queue, config)]
    assert type(reports[0][1][0]) is Ready and reports[0][0] == 0  # begun before it takes work
    assert type(reports[1][1][0]) is Started  # the first start goes out at once (the runner was idle)
    taken, split = next((taken, m) for taken, report in reports for m in report if type(m) is Finished and m.splits)
    assert taken == 1 and split.item == 0  # before the runner took its next item
    assert not split.records and split.splits[0][0] == 0
    finished = [m for _, report in reports for m in report if type(m) is Finished and m.records]
    assert [m.records.keys for m in finished] == [["fake::sin::float64::sample0::grad"]]


def test_a_case_that_crashed_its_worker_then_passes_alone_is_an_error_that_says_so(ray_cluster, tmp_path):
    """A crash is never a pass: the case that crashed (here in its batch, then again, by name,
    when the batch ran carefully) runs once more alone, passes, and its record is the error that
    says the crash did not reproduce, with the rerun's verdict; the others keep theirs."""
    suite = FakeSuite(ops=("dietwice",), samples=3, odd=1, marker=str(tmp_path / "m"))
    result = run_suite(suite, Selection(checks=("grad",)), RunOptions(timeout=60, batch_size=8))
    verdicts = _verdicts(result)
    crashed = verdicts.pop("fake::dietwice::float64::sample1::grad")
    assert set(verdicts.values()) == {"pass"} and len(verdicts) == 2
    assert crashed == "error"
    message = result.records[1].message
    assert "the worker running this case crashed" in message
    assert message.endswith("run again alone, it did not crash (the rerun: pass)"), message


def test_few_runners_have_each_message_handled_as_it_arrives(ray_cluster, monkeypatch):
    """With a few runners and coordinators, the driver waits for one message, not for all of
    them or ``POLL`` seconds (a split case's verdict, and the run's end, came up to ``POLL``
    late: on 2 workers, 3 % of a split case's time), without a second wait per message; with
    many, it waits for all or ``POLL`` (its rounds stay few)."""
    import ray

    from distcheck.runner import dispatch

    asked = []
    wait = ray.wait

    def recording_wait(refs, *, num_returns=1, timeout=None, **kwargs):
        if sys._getframe(1).f_code is dispatch.Dispatch.receive.__code__:  # the dispatch's waits for messages
            asked.append((len(refs), num_returns, timeout))
        return wait(refs, num_returns=num_returns, timeout=timeout, **kwargs)

    monkeypatch.setattr(dispatch.ray, "wait", recording_wait)
    suite = FakeSuite("slow", ops=("big", "sin"))
    result = run_suite(suite, Selection(checks=("grad",)), RunOptions(timeout=120, split_seconds=0.01))
    assert [r.verdict for r in result.records] == ["pass", "pass"] and result.records[0].tasks > 1
    assert asked and all(wanted == 1 and n <= dispatch.PROMPT_UP_TO for n, wanted, _ in asked)
    # a wait lasts POLL, or PROMPT_POLL once the queue has all the work (a signal is acted on in its own thread)
    assert {timeout for *_, timeout in asked} <= {dispatch.POLL, dispatch.PROMPT_POLL}

    asked.clear()
    monkeypatch.setattr(dispatch, "PROMPT_UP_TO", 0)
    result = run_suite(suite, Selection(checks=("grad",)), RunOptions(timeout=120, split_seconds=0.01))
    assert [r.verdict for r in result.records] == ["pass", "pass"]
    rounds = [(n, wanted) for n, wanted, timeout in asked if timeout == dispatch.POLL]
    assert rounds and all(wanted == n for n, wanted in rounds)
    assert {timeout for *_, timeout in asked} <= {dispatch.POLL, 0}
