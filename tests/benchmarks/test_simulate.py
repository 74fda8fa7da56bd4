"""The dispatcher model's basic properties, its workloads, calibration and command line."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

from benchmarks import simulate
from benchmarks.sim import calibration
from benchmarks.sim.calibration import Calibration
from benchmarks.sim.model import Model, predict
from benchmarks.sim.nightly import nightly, ratios
from benchmarks.sim.workload import Case, Group, Workload, from_recording
from distcheck.suites.replay import parse
from tests.runner.lifo_policy import LifoPolicy

FREE = Calibration(
    task_overhead=0.0,
    driver_submit=0.0,
    driver_per_case=0.0,
    driver_per_message=0.0,
    driver_per_group=0.0,
    listing_per_group=0.0,
    listing_per_case=0.0,
    coordinator_start=0.0,
    assembly_per_byte=0.0,
    idle_poll=0.0,
)


def workload(*groups: list[float], mode: str = "fast") -> Workload:
    return Workload(mode, tuple(Group(f"g{k}", tuple(Case(s) for s in g)) for k, g in enumerate(groups)))


def random_workload(seed: int) -> Workload:
    rng = random.Random(seed)
    groups = [[rng.choice([0.001, 0.01, 0.1, 0.5, 2.0]) for _ in range(rng.randint(1, 40))] for _ in range(30)]
    return workload(*groups)


def test_one_worker_takes_the_work_plus_its_overheads():
    w = random_workload(0)
    free = predict(w, 1, FREE)
    assert free.wall == pytest.approx(w.total)
    no_driver = {"driver_per_case": 0.0, "driver_per_message": 0.0, "driver_submit": 0.0, "driver_per_group": 0.0}
    costly = predict(w, 1, Calibration().with_values(no_driver))
    assert costly.wall == pytest.approx(w.total + costly.overhead, rel=1e-6)
    c = Calibration()
    listings = c.listing_per_group * len(w.groups) + c.listing_per_case * sum(len(g.cases) for g in w.groups)
    assert costly.overhead >= costly.tasks * 0.0008 + listings - 1e-9


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("workers", [2, 8, 64, 256])
def test_a_run_never_beats_the_bound_and_its_slot_seconds_add_up(seed, workers):
    p = predict(random_workload(seed), workers, Calibration())
    assert p.wall >= p.bound * (1 - 1e-9)
    assert p.work == pytest.approx(random_workload(seed).total)
    assert p.work + p.overhead + p.starved + p.tail == pytest.approx(workers * p.wall)
    assert min(p.starved, p.tail) >= -1e-6


def test_longest_first_beats_suite_order_on_a_long_group_last():
    w = workload([0.1], [0.1], [0.1], [0.1], [0.4])  # none costly (< 1 s): by groups alone
    in_order = predict(w, 2, FREE, durations=False).wall
    longest_first = predict(w, 2, FREE, durations=True).wall
    assert (in_order, longest_first) == (pytest.approx(0.6), pytest.approx(0.4))
    costly = workload([1.0], [1.0], [1.0], [1.0], [4.0])  # each alone, longest first, once listed
    assert predict(costly, 2, FREE, durations=True).wall == pytest.approx(4.0)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("durations", [True, False])
def test_without_overheads_a_run_keeps_grahams_bound(seed, durations):
    """Greedy list scheduling, in any order, ends by total / P + the longest task."""
    rng = random.Random(seed)
    w = workload(*[[rng.uniform(0.1, 5.0)] for _ in range(20)])
    assert predict(w, 4, FREE, durations=durations).wall <= w.total / 4 + w.longest + 1e-9


def test_a_split_case_spreads_over_every_worker():
    split = Workload("slow", (Group("ctc", (Case(64.0, split=True, columns=16000, bytes=10**6),)),))
    p = predict(split, 64, Calibration())
    assert p.tasks == 2 + 2 * 64  # listing its group, its own task, then two rounds of chunks
    assert 1.0 < p.wall < 1.3
    assert predict(split, 1, FREE).wall == pytest.approx(64.0 * (1 + 6 / 32000))  # estimate and planning


def test_split_cases_running_together_are_each_cut_for_their_share_of_the_workers():
    """Sixteen split cases found at once on 64 workers, eight at a time: each cut for its share
    in shrinking rounds (the dispatcher's split_share, the real cost model), not for every
    worker: about half the chunks, so half the driver's messages, for a wall within a few
    percent of the bound."""
    cases = Workload(
        "slow", tuple(Group(f"g{k}", (Case(64.0, split=True, columns=16000, bytes=10**6),)) for k in range(16))
    )
    p = predict(cases, 64, Calibration())
    every_worker = 16 * (2 + 2 * 64)  # as a lone split case is cut, each
    assert p.tasks < 0.6 * every_worker
    assert p.wall < 1.1 * p.bound


def test_a_split_case_over_the_block_budget_is_compared_by_block_jobs_on_the_workers():
    """Its units hold at most half the block budget each (rows twice), and one block job per numerical
    column unit compares on a worker slot (overhead, not work); within the budget the
    coordinator compares, on no slot."""
    block = Calibration(block_bytes=2**20, assembly_per_byte=1e-6)  # 1 s a MB: visible
    big = Workload("slow", (Group("big", (Case(64.0, split=True, columns=16000, bytes=100 * 2**20),)),))
    p = predict(big, 64, block)
    units = 300  # 100 columns and 200 rows units of 100 MB / 1 MB, more than the 128 timed chunks
    assert p.tasks == 2 + units + units // 3
    assert p.work == pytest.approx(64.0)
    assert p.overhead >= 100 * 2**20 * 1e-6  # the comparison, on the slots
    assert p.work + p.overhead + p.starved + p.tail == pytest.approx(64 * p.wall)
    assert p.wall < 64.0 / 64 + 104.9 / 64 + 1.0  # the comparison spread too, not 105 s in one process
    whole = predict(big, 64, replace(block, block_bytes=2**30))
    assert whole.tasks == 2 + 2 * 64 and whole.wall > 104.0  # compared on the coordinator


def test_a_runner_reports_per_second_of_work_not_per_item():
    """Runners take their items from the queue and report every ``report_every`` seconds (and
    when they start after being idle, and when they run out of work): 100 items of 1 s on one
    worker make about 100 reports, not two or three per item."""
    w = workload(*[[0.1] * 10 for _ in range(100)])
    messages = Calibration(driver_per_message=1e-3).with_values({k: 0.0 for k in ("driver_per_case", "driver_submit")})
    p = predict(w, 1, messages.with_values({"driver_per_group": 0.0, "report_every": 1.0}))
    assert 100 <= p.driver_cpu / 1e-3 <= 103
    # the driver is not in the runner's path: the run ends when it has read the last reports
    assert w.total + p.overhead < p.wall <= w.total + p.overhead + 3e-3


def test_the_driver_can_be_the_bound():
    w = workload(*[[0.001] * 32 for _ in range(100)])
    p = predict(w, 256, Calibration(driver_per_case=0.001))
    assert p.bound == p.driver_cpu >= 3.2
    assert p.wall >= p.driver_cpu


def test_batches_closed_by_recorded_seconds_shorten_the_tail():
    """The default policy: without durations batches of 32 cases (24 s each here); with them,
    guided by the work not handed out yet."""
    w = workload(*[[0.75] * 64 for _ in range(4)])
    by_count = predict(w, 64, Calibration(), durations=False)
    guided = predict(w, 64, Calibration(), durations=True)
    assert by_count.wall > 20 and guided.wall < 6 and guided.tail < by_count.tail


def test_the_simulator_runs_an_outside_policy():
    """The model drives the policy objects themselves: last in, first out hands the groups out
    in reverse (each listed and run whole by one runner)."""
    w = workload([0.5] * 40, [0.1], [0.2] * 3, mode="slow")
    model = Model(w, 2, FREE, durations=True, policy=LifoPolicy)
    p = model.run()
    assert model.policy.handed == ["sim::g2::float64", "sim::g1::float64", "sim::g0::float64"]
    assert p.tasks == 3 and p.wall == pytest.approx(0.1 + 20.0)  # g0 whole, after g1, on one worker
    default = predict(w, 2, FREE, durations=True)
    assert default.tasks > 3 and default.wall < p.wall


def recording(split_columns: int, split_work: float):
    """A slow grad run of 2 workers: a 1 s case of op a, a skipped op b, a split case of op c."""
    split = {"columns": split_columns, "rows": 1, "seconds": split_work, "bytes": 16 * split_columns}
    cases = [
        {"id": "s::a::float64::sample0::grad", "verdict": "pass", "seconds": 1.0, "tasks": 1},
        {"id": "s::b::float64::grad", "verdict": "skipped", "seconds": 0, "tasks": 0},
        {"id": "s::c::float64::sample0::grad", "verdict": "pass", "seconds": 3.0, "tasks": 9, "estimate": split},
    ]
    return parse({"summary": {"suite": "s", "mode": "slow", "workers": 2, "seconds": 10}, "cases": cases})


def test_nightly_ratios_and_cases():
    assert ratios(10, 10) == {"grad": 1.0, "gradgrad": 3.0, "fwgrad": 1.0, "fwgrad_bwgrad": 4.0}
    assert ratios(0, 0) == ratios(1, 1)
    w = nightly(recording(1000, 5.0))
    assert w.cases == 8 and w.decided == 4
    assert w.total == pytest.approx(1.0 * (1 + 3 + 1 + 4) + 5.0 * (1 + 2 * 2001 / 1001 + 2000 / 1001 + 4))
    assert [c.split for c in w.groups[0].cases] == [False] * 4  # at most 4 s
    assert [c.split for c in w.groups[1].cases] == [True] * 4
    assert [c.columns for c in w.groups[1].cases] == [1000, 1001, 1000, 1001]
    # any size splits (block by block), up to the cluster's memory: above it, skipped
    large = nightly(recording(2 * 10**8, 50.0))
    assert [c.split for c in large.groups[1].cases] == [True] * 4
    assert large.groups[1].cases[0].bytes == 32 * 10**8
    capped = nightly(recording(2 * 10**8, 50.0), cluster_bytes=4 * 10**9)
    assert (capped.cases, capped.decided) == (6, 4 + 2)  # gradgrad, fwgrad_bwgrad: 2 (c + r) c 8 bytes


def test_workload_of_a_recording_and_of_its_replay():
    recorded = from_recording(recording(16000, 50.0))
    assert (recorded.total, recorded.longest, recorded.split_cases, recorded.workers) == (51.0, 1.0, 1, 2)
    assert recorded.decided == 1
    assert recorded.groups[1].cases[0] == Case(50.0, True, 16000, 256000)
    replayed = from_recording(recording(16000, 50.0), replay=True, scale=0.1)
    assert replayed.groups[1].cases[0] == Case(5.0, True, 1000, 0)
    assert replayed.seconds == pytest.approx(1.0)


def test_calibration_file_and_overrides(tmp_path):
    default = calibration.load()
    assert default.task_overhead == 0.0008 and default.listing_per_case > 0
    assert calibration.load(replay=True).listing_per_case == 0.0
    assert default.with_values({"idle_poll": 0.1}).idle_poll == 0.1
    with pytest.raises(ValueError, match="unknown calibration constant 'batch_fast'"):  # the policy's
        default.with_values({"batch_fast": 8})
    with pytest.raises(ValueError, match="unknown calibration constant 'nope'"):
        default.with_values({"nope": 1})


def test_the_command_line(tmp_path, capsys):
    cases = [
        {"id": f"s::op{k}::float64::sample{i}::grad", "verdict": "pass", "seconds": 0.1, "tasks": 1}
        for k in range(5)
        for i in range(10)
    ]
    path = tmp_path / "r.json"
    path.write_text(
        json.dumps({"summary": {"suite": "s", "mode": "fast", "workers": 2, "seconds": 3.0}, "cases": cases})
    )
    assert simulate.main([str(path), "--workers", "1,4"]) == 0
    out = capsys.readouterr().out
    assert "50 runnable cases in 5 groups" in out and out.count("\n     4 ") == 1
    assert simulate.main(["--validate", str(path)]) == 0
    assert "recorded wall time (whole run, start-up included" in capsys.readouterr().out
    assert simulate.main(["--validate", str(path), "--wall", "0.5"]) == 0
    assert "recorded wall time (as given (--wall)): 0.50 s" in capsys.readouterr().out
    assert simulate.main([str(path), "--nightly", "--workers", "256"]) == 0
    assert "the whole slow nightly, ESTIMATED" in capsys.readouterr().out
    assert simulate.main([str(tmp_path / "missing.json")]) == 2
    assert simulate.main([str(path), "--set", "nope=1"]) == 2
    assert "unknown calibration constant" in capsys.readouterr().err
    assert simulate.main([str(path), "--workers", "2", "--policy", "tests.runner.lifo_policy:LifoPolicy"]) == 0
    assert "policy tests.runner.lifo_policy:LifoPolicy" in capsys.readouterr().out
    assert simulate.main([str(path), "--policy", "nope"]) == 2
    assert "simulate: error: unknown policy 'nope'" in capsys.readouterr().err
