"""The run folder: records streamed as they arrive, read back for a resume, refused when unfit."""

from __future__ import annotations

import importlib.metadata
import json

import pytest

from distcheck.records.case_record import CaseRecord, RecordBatch
from distcheck.runner import RunOptions, run_suite
from distcheck.storage.run_folder import (
    RECORDS,
    RunWriter,
    check_new_folder,
    check_resumable,
    default_folder,
    read_run,
    run_start,
)
from distcheck.suites import Selection, UsageError
from distcheck.suites.base import CaseId
from tests.runner.fake_suite import FakeSuite

SELECTION = Selection(checks=("grad",), ops=("sin", "wrong", "xfail"))


def _run(folder, selection=SELECTION, **options):
    options = RunOptions(serial=True, timeout=60, **options)
    writer = RunWriter(folder, run_start("fake", "fast", selection, options, ["distcheck", "run"]))
    return run_suite(FakeSuite(), selection, options, writer)


def _lines(folder):
    return [json.loads(line) for line in (folder / RECORDS).read_text().splitlines()]


def test_records_stream_in_reportlog_layout(tmp_path):
    result = _run(tmp_path)
    lines = _lines(tmp_path)
    kinds = [line["$report_type"] for line in lines]
    assert kinds == ["RunStart", "CaseRecord", "CaseRecord", "CaseRecord", "RunFinish"]
    start = lines[0]
    assert start["suite"] == "fake" and start["mode"] == "fast"
    selection = {"checks": ["grad"], "dtypes": None, "ops": ["sin", "wrong", "xfail"], "substring": None}
    assert start["selection"] == selection
    assert start["options"]["timeout"] == 60 and start["versions"]["distcheck"]
    assert [line["id"] for line in lines[1:4]] == [r.id for r in result.records]
    assert lines[2]["verdict"] == "fail" and lines[-1]["complete"] is True


def test_a_record_is_on_disk_as_soon_as_it_is_recorded(tmp_path):
    writer = RunWriter(tmp_path, {"$report_type": "RunStart"})
    assert not (tmp_path / RECORDS).exists()  # until the run starts
    writer.recorded(RecordBatch([CaseRecord(CaseId("fake", "sin", "float64", "grad", 0), "pass")]))
    assert len((tmp_path / RECORDS).read_text().splitlines()) == 2  # flushed, the file still open
    writer.close()


def test_read_back_equals_what_was_run(tmp_path):
    result = _run(tmp_path)
    log = read_run(tmp_path)
    assert log.complete and log.selection == SELECTION
    assert [r.to_json() for r in log.records] == [r.to_json() for r in result.records]
    assert RunOptions.recorded(log.start["options"], serial=True) == RunOptions(serial=True, timeout=60)


def test_a_truncated_last_line_is_the_one_being_written(tmp_path):
    _run(tmp_path)
    lines = (tmp_path / RECORDS).read_text().splitlines()[:3]
    (tmp_path / RECORDS).write_text("\n".join(lines) + '\n{"$report_type": "CaseRec')
    log = read_run(tmp_path)
    assert len(log.records) == 2 and not log.complete


def test_resume_runs_only_what_is_missing(tmp_path):
    selection = Selection(checks=("grad",), ops=("sin", "wrong"))
    first = _run(tmp_path, selection)
    lines = (tmp_path / RECORDS).read_text().splitlines()
    (tmp_path / RECORDS).write_text("\n".join(lines[:2]) + "\n")  # as if killed after the first case
    log = read_run(tmp_path)
    writer = RunWriter(tmp_path, None, {r.id for r in log.records})
    resumed = run_suite(
        FakeSuite(), log.selection, RunOptions.recorded(log.start["options"], serial=True), writer, recorded=log.records
    )
    assert [(r.id, r.verdict) for r in resumed.records] == [(r.id, r.verdict) for r in first.records]
    kinds = [line["$report_type"] for line in _lines(tmp_path)]
    assert kinds == ["RunStart", "CaseRecord", "RunResume", "CaseRecord", "RunFinish"]
    assert read_run(tmp_path).complete


def test_new_folders(tmp_path):
    folder = default_folder("torch-opinfo", "slow", str(tmp_path))
    assert folder.parent == tmp_path and folder.name.startswith("torch-opinfo-slow-") and folder.name.endswith("Z")
    assert check_new_folder(tmp_path / "a" / "b") == tmp_path / "a" / "b"
    _run(tmp_path / "a" / "b")  # made as the run starts
    with pytest.raises(UsageError, match="already holds a run: finish it with --resume"):
        check_new_folder(tmp_path / "a" / "b")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no records.jsonl in it: not a run folder"),
        ("not json\n{}\n", "records.jsonl line 1 is not JSON"),
        ('{"a": 1}\n', "line 1 is not a distcheck record"),
        ('{"$report_type": "CaseRecord"}\n', "does not start with a RunStart line"),
        ('{"$report_type": "RunStart", "suite": "fake"}\n', "RunStart line lacks mode, selection, options, versions"),
    ],
)
def test_unreadable_folders(tmp_path, content, message):
    if content is not None:
        (tmp_path / RECORDS).write_text(content)
    with pytest.raises(UsageError, match=message):
        read_run(tmp_path)


def test_unresumable_runs(tmp_path):
    _run(tmp_path)
    with pytest.raises(UsageError, match="the run is finished: nothing to resume"):
        check_resumable(read_run(tmp_path), "fake")
    with pytest.raises(UsageError, match="sample0::grad of suite 'fake', not of 'other'"):
        check_resumable(read_run(tmp_path), "other")
    lines = _lines(tmp_path)
    lines[0]["versions"]["distcheck"] = "0.0.1"
    (tmp_path / RECORDS).write_text("".join(json.dumps(line) + "\n" for line in lines[:-1]))
    with pytest.raises(UsageError, match="it was run with distcheck 0.0.1, this is distcheck"):
        check_resumable(read_run(tmp_path), "fake")


def test_a_run_records_its_engines_versions_and_a_resume_refuses_another(tmp_path):
    options = RunOptions(serial=True, timeout=60)
    writer = RunWriter(tmp_path, run_start("fake", "fast", SELECTION, options, ["distcheck", "run"], ("numpy",)))
    run_suite(FakeSuite(), Selection(checks=("grad",), ops=("sin",)), options, writer)
    lines = _lines(tmp_path)
    assert lines[0]["versions"]["engines"] == {"numpy": importlib.metadata.version("numpy")}
    (tmp_path / RECORDS).write_text("".join(json.dumps(line) + "\n" for line in lines[:-1]))  # interrupted
    check_resumable(read_run(tmp_path), "fake")  # the same versions: resumable
    lines[0]["versions"]["engines"]["numpy"] = "0.0.1"
    (tmp_path / RECORDS).write_text("".join(json.dumps(line) + "\n" for line in lines[:-1]))
    with pytest.raises(UsageError, match=r"it was run with numpy 0\.0\.1, this is numpy \d"):
        check_resumable(read_run(tmp_path), "fake")
