"""A run's ``vectorize`` (``distcheck run --no-vectorize``): down to every case's checks, serial
and on Ray; recorded in the run folder, so that a resume keeps it; the same verdicts either way.
What each case's comparisons were decided on: in its record, totalled in the reports' summaries."""

from __future__ import annotations

import json
import pickle

import pytest

import distcheck.suites
from distcheck.cli import main
from distcheck.kinds import Fallback
from distcheck.records.case_record import CaseRecord, RecordBatch
from distcheck.records.record_list import RecordList
from distcheck.reduce.counts import BatchCounts
from distcheck.reports import console, json_report
from distcheck.reports.load import record_from_json
from distcheck.runner import RunOptions, run_suite
from distcheck.storage.run_folder import RECORDS, read_run
from distcheck.suites import Selection
from distcheck.suites.base import CaseId
from tests.runner.fake_cli import SUITES
from tests.runner.fake_suite import FakeSuite

GRAD = Selection(checks=("grad",))
OPS = ("sin", "big", "wrong")  # big: 3,000 elements, batched; wrong: a failure, judged element by element


def _verdicts(result) -> dict[str, str]:
    return {record.id: record.verdict for record in result.records}


def _counted(result) -> dict[str, BatchCounts | None]:
    return {
        record.case.op: record.batch_counts and BatchCounts.from_json(record.batch_counts) for record in result.records
    }


def test_without_batches_the_verdicts_are_the_same_and_nothing_is_counted():
    suite = FakeSuite("slow", ops=OPS)
    batched = run_suite(suite, GRAD, RunOptions(serial=True))
    exact = run_suite(suite, GRAD, RunOptions(serial=True, vectorize=False))
    assert _verdicts(batched) == _verdicts(exact)
    assert list(_verdicts(exact).values()) == ["pass", "pass", "fail"]
    counted = _counted(batched)
    assert counted["sin"].fallbacks == {Fallback.SMALL: 1} and counted["sin"].batched == 0  # 4 elements
    assert counted["big"] and counted["wrong"]  # each case's comparison counted, batched or not (timed)
    assert _counted(exact) == dict.fromkeys(OPS)
    total = RecordList.of(batched.records).batch_counts()
    assert total.batched + total.exact == 3
    assert json_report.report_summary(batched)["batch_counts"] == total.to_json()
    assert f"slow-mode comparisons: {total.describe()}" in console.summary(batched)
    for nothing in (exact, run_suite(FakeSuite("fast", ops=OPS), GRAD, RunOptions(serial=True))):
        assert "batch_counts" not in json_report.report_summary(nothing)
        assert "comparisons" not in console.summary(nothing)


@pytest.mark.ray
def test_on_ray_and_in_split_cases_the_option_reaches_the_checks(ray_cluster):
    suite = FakeSuite("slow", ops=("big", "sin"))
    split = dict(timeout=120, split_seconds=0.01)  # big: checked in Jacobian chunks by a coordinator
    batched = run_suite(suite, GRAD, RunOptions(**split))
    exact = run_suite(suite, GRAD, RunOptions(**split, vectorize=False))
    assert _verdicts(batched) == _verdicts(exact) and set(_verdicts(exact).values()) == {"pass"}
    assert [record.tasks > 1 for record in batched.records] == [True, False]
    assert all(_counted(batched).values()) and _counted(exact) == {"big": None, "sin": None}


def test_the_run_folder_records_it_and_a_resume_keeps_it(monkeypatch, tmp_path, capsys):
    for name, where in SUITES.items():
        monkeypatch.setitem(distcheck.suites._SUITES, name, where)
    run = ["run", "--suite", "fake", "--mode", "slow", "--ops", "sin", "--checks", "grad", "--serial"]
    assert main([*run, "--no-vectorize", "--out", str(tmp_path / "exact")]) == 0
    assert main([*run, "--out", str(tmp_path / "batched")]) == 0
    assert RunOptions.recorded(read_run(tmp_path / "exact").start["options"], serial=True).vectorize is False
    assert RunOptions.recorded(read_run(tmp_path / "batched").start["options"], serial=True).vectorize is True
    lines = (tmp_path / "exact" / RECORDS).read_text().splitlines()
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / RECORDS).write_text(lines[0] + "\n")  # killed before its first record
    capsys.readouterr()
    assert main(["run", "--resume", str(tmp_path / "cut")]) == 0
    assert RunOptions.recorded(read_run(tmp_path / "cut").start["options"], serial=True).vectorize is False


def test_a_record_carries_its_counts_compactly_and_old_records_load():
    counts = BatchCounts(2)
    counts.fell_back(Fallback.SLOWER)
    counts.fell_back(Fallback.SMALL)
    counts.fell_back(Fallback.SMALL)
    case = CaseId("fake", "sin", "float64", "grad", 0)
    record = CaseRecord(case, "pass", seconds=1.0, tasks=1, batch_counts=counts.to_json())
    assert record.to_json()["batch_counts"] == {"batched": 2, "fallbacks": {"small": 2, "slower": 1}}
    batch = pickle.loads(pickle.dumps(RecordBatch([record, CaseRecord(case, "pass")])))  # as records travel
    assert batch.record(0).batch_counts == record.batch_counts and batch.record(1).batch_counts is None
    assert CaseRecord.from_json(json.loads(batch.record(0).json_text)).batch_counts == record.batch_counts
    assert record_from_json(record.to_json()).batch_counts == record.batch_counts
    old = {k: v for k, v in record.to_json().items() if k != "batch_counts"}
    assert CaseRecord.from_json(old).batch_counts is None and record_from_json(old).batch_counts is None
    total = RecordList.of([record, CaseRecord(case, "fail"), record]).batch_counts()
    assert total.describe() == "4 batched, 6 element by element: small 4, slower 2"
    assert not RecordList.of([CaseRecord(case, "pass")]).batch_counts()
