"""The replay suite: a recorded run's cases, each a real check taking its recorded time (scaled)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from distcheck.case.budget import SPLIT, Budget, estimate
from distcheck.case.run import SplitRequest, run_case
from distcheck.runner import RunOptions, run_suite
from distcheck.suites import CaseId, Selection, UsageError, replay
from distcheck.suites.base import GroupInfo
from distcheck.suites.replay import load, replay_suite, split_shape

SUITE = "torch-opinfo"


def record(op, check, sample, verdict="pass", seconds=0.3, tasks=1, dtype="float64", **extra):
    case = CaseId(SUITE, op, dtype, check, sample)
    fields = {"op": op, "check": check, "dtype": dtype, "sample": sample, "message": ""}
    return {"id": str(case), **fields, "verdict": verdict, "seconds": seconds, "tasks": tasks, **extra}


CASES = [
    record("add", "grad", 0),
    record("add", "grad", 1, "fail"),
    record("add", "gradgrad", 0, "error", message="boom"),
    record("cov", "grad", None, "skipped", 0.0, 0, message="not differentiable"),
    record("cov", "gradgrad", None, "xfail", 0.0, 0),
    record("mul", "grad", 0, seconds=0.2, dtype="complex128"),
    record("ctc", "grad", 0, seconds=30.0, tasks=40, estimate={"seconds": 60.0, "columns": 16000}),
]


@pytest.fixture
def report(tmp_path):
    path = tmp_path / "report.json"
    summary = {"suite": SUITE, "mode": "slow", "workers": 2, "seconds": 42.0}
    path.write_text(json.dumps({"summary": summary, "cases": CASES}))
    return str(path)


def test_groups_are_op_and_dtype_with_unrun_cases_decided(report):
    suite = replay_suite(report)
    assert (suite.name, suite.mode) == (SUITE, "slow")
    items = list(suite.groups(Selection()))
    groups = [i for i in items if isinstance(i, GroupInfo)]
    assert [(g.op, g.dtype, g.checks) for g in groups] == [
        ("add", "float64", ("grad", "gradgrad")),
        ("mul", "complex128", ("grad",)),
        ("ctc", "float64", ("grad",)),
    ]
    decided = {str(i.id): (i.status, i.reason) for i in items if not isinstance(i, GroupInfo)}
    assert decided == {
        f"{SUITE}::cov::float64::grad": ("skipped", "not differentiable"),
        f"{SUITE}::cov::float64::gradgrad": ("xfail", ""),
    }


@pytest.mark.parametrize("checks", [("grad", "gradgrad"), ("gradgrad",), ("grad",), ("fwgrad",)])
def test_groups_read_from_the_outline_are_those_read_case_by_case(report, checks):
    """Without a substring the driver reads each group's outline (no work per case); with one,
    every case's id: the same groups and decided cases whenever the substring takes every case."""
    suite = replay_suite(report)
    outlined = list(suite.groups(Selection(checks=checks)))
    case_by_case = list(suite.groups(Selection(checks=checks, substring="::")))
    assert outlined == case_by_case and outlined == list(suite.groups(Selection(checks=checks, substring="")))
    assert outlined or checks == ("fwgrad",)


def test_listing_has_fingerprints_of_id_and_seconds_and_cost_hints(report):
    suite = replay_suite(report)
    groups = {g.op: g for g in suite.groups(Selection()) if isinstance(g, GroupInfo)}
    listed = suite.list_group(groups["add"], Selection(checks=("grad",)))
    assert [c.id.sample for c in listed] == [0, 1]
    assert all(c.fingerprint == suite.build(c.id).fingerprint for c in listed)
    assert listed[0].fingerprint != listed[1].fingerprint
    (ctc,) = suite.list_group(groups["ctc"], Selection())
    assert ctc.cost == 16000  # the recorded input elements, as the slow suite's hint


def test_selection_filters_and_unknown_names(report):
    suite = replay_suite(report)
    ids = [str(c.id) for c in suite.cases(Selection(checks=("gradgrad",)))]
    assert ids == [f"{SUITE}::add::float64::sample0::gradgrad", f"{SUITE}::cov::float64::gradgrad"]
    assert [c.id.op for c in suite.cases(Selection(dtypes=("complex128",)))] == ["mul"]
    with pytest.raises(UsageError, match="'nope' is not in the recording"):
        list(suite.cases(Selection(ops=("nope",))))


def test_bad_reports_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="cannot read"):
        replay_suite(str(tmp_path / "missing.json"))
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(UsageError, match="not JSON"):
        replay_suite(str(tmp_path / "bad.json"))
    (tmp_path / "list.json").write_text("[1]")
    with pytest.raises(UsageError, match="not a distcheck JSON report"):
        replay_suite(str(tmp_path / "list.json"))
    (tmp_path / "ok.json").write_text(json.dumps({"summary": {}, "cases": []}))
    with pytest.raises(UsageError, match="scale must be positive"):
        replay_suite(str(tmp_path / "ok.json"), scale=0)


def test_a_serial_replay_gives_the_recorded_verdicts_and_sleeps_the_scaled_times(report, monkeypatch):
    slept = []
    monkeypatch.setattr("distcheck.suites.replay.time.sleep", slept.append)
    suite = replay_suite(report, scale=0.01)
    result = run_suite(suite, Selection(), RunOptions(serial=True, timeout=None))
    columns, pause = split_shape(0.6)
    verdicts = {r.id.split("::", 1)[1]: r.verdict for r in result.records}
    assert verdicts == {
        "add::float64::sample0::grad": "pass",
        "add::float64::sample1::grad": "fail",
        "add::float64::sample0::gradgrad": "error",
        "cov::float64::grad": "skipped",
        "cov::float64::gradgrad": "xfail",
        "mul::complex128::sample0::grad": "pass",
        "ctc::float64::sample0::grad": "pass",  # serial: never split, runs whole
    }
    whole = [s for s in slept if s != pause]
    assert sorted(whole) == [0.002, 0.003, 0.003, 0.003]
    assert slept.count(pause) >= 2 * columns  # the split case's evaluations


def test_a_split_case_is_estimated_at_its_recorded_work_and_split(report, monkeypatch):
    monkeypatch.setattr("distcheck.suites.replay.time.sleep", lambda s: None)
    suite = replay_suite(report, scale=0.01)
    case = CaseId(SUITE, "ctc", "float64", "grad", 0)
    built = suite.build(case)
    columns, pause = split_shape(0.6)
    assert built.inputs[0].size == columns and 2 * columns * pause == pytest.approx(0.6)
    monkeypatch.undo()
    estimated = estimate(built)
    assert estimated.seconds >= 0.6  # 2 columns evaluations and 2 backward passes of at least the pause
    assert Budget(2**30, split_seconds=0.4).decide(estimated)[0] == SPLIT
    outcome = run_case(suite, case, built.fingerprint, Budget(2**30, split_seconds=0.4))
    assert type(outcome) is SplitRequest


def test_split_shape_has_the_work_in_evaluations_the_estimate_times_three_times():
    assert split_shape(100.0) == (1000, 0.05)
    columns, pause = split_shape(1.0)
    assert 2 * columns * pause == pytest.approx(1.0) and columns + 1 >= 1000


def test_the_report_is_read_once_per_process(report):
    assert load(report) is load(report)


def test_preparing_indexes_the_recording_so_that_a_warm_worker_s_first_case_does_not(report):
    suite = replay_suite(report)
    load.cache_clear()
    suite.prepare()
    recording = load(report)
    assert {"cases", "by_id", "by_group"} <= set(vars(recording))  # cached properties, computed
    groups = {("add", "float64"), ("cov", "float64"), ("mul", "complex128"), ("ctc", "float64")}
    assert set(recording.by_group) == groups


def test_a_replay_worker_never_imports_torch(report):
    code = (
        "import sys\n"
        "from distcheck.case.budget import Budget\n"
        "from distcheck.case.run import run_case\n"
        "from distcheck.suites.base import CaseId\n"
        "from distcheck.suites.replay import replay_suite\n"
        f"suite = replay_suite({report!r}, scale=0.001)\n"
        f"case = CaseId.parse('{SUITE}::add::float64::sample0::grad')\n"
        "outcome = run_case(suite, case, suite.build(case).fingerprint, Budget(2**30))\n"
        "print(outcome.verdict, 'torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["pass", "False"]


def test_without_checks_a_passing_whole_case_only_sleeps(report, monkeypatch):
    slept = []
    monkeypatch.setattr("distcheck.suites.replay.time.sleep", slept.append)
    monkeypatch.setattr(replay, "_pooled", replay.PooledSleep())
    suite = replay_suite(report, scale=0.01, checks=False)
    result = run_suite(suite, Selection(ops=("add",)), RunOptions(serial=True, timeout=None))
    assert [r.verdict for r in result.records] == ["pass", "fail", "error"]
    assert suite.build(CaseId(SUITE, "add", "float64", "grad", 0)).calls == ()
    assert len(suite.build(CaseId(SUITE, "add", "float64", "grad", 1)).calls) == 1  # fail: a real check
    # the fail and the error run real checks, sleeping before them; the case that passed, built
    # twice (run, and above), pools its 3 ms sleeps into one of 6 ms
    assert sorted(slept) == [0.003, 0.003, 0.006]


def test_pooled_sleeps_keep_the_total_and_carry_what_a_sleep_overshoots():
    now, slept = [0.0], []

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds + 0.0004  # every sleep overshoots

    pooled = replay.PooledSleep(0.005, sleep, lambda: now[0])
    for _ in range(100):
        pooled(0.001)
    assert all(s >= 0.005 - 0.0004 for s in slept) and len(slept) < 25  # woken ~every 5 ms, not 100 times
    assert now[0] + pooled.owed == pytest.approx(0.1)  # the worker's time is the recorded total
    assert abs(pooled.owed) < 0.005


def test_a_recording_of_a_gpu_run_groups_its_cases_by_op_and_dtype():
    from distcheck.suites.replay import _outline

    records = [
        {"id": "torch-opinfo::sinh::cuda::float64::sample0::grad", "verdict": "pass"},
        {"id": "torch-opinfo::sinh::cuda::complex128::sample0::grad", "verdict": "pass"},
        {"id": "torch-opinfo::cholesky::cuda::float64::grad", "verdict": "skipped"},
    ]
    assert sorted(_outline(records)) == [("cholesky", "float64"), ("sinh", "complex128"), ("sinh", "float64")]
