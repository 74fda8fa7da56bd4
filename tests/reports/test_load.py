"""Reading runs back: JSON reports, run folders (report.json, or records.jsonl of an interrupted run)."""

from __future__ import annotations

import json
import os

import pytest

from distcheck.reports.load import LoadError, load_run
from tests.reports.runs import records, run_folder, write_report


def test_a_json_report_reads_back_as_the_records_it_was_written_from(tmp_path):
    run = load_run(write_report(tmp_path / "r.json", records()))
    assert run.records == records()
    assert run.info["suite"] == "torch-opinfo" and run.folder is None


def test_a_run_folder_reads_its_report_and_finds_the_blocks(tmp_path):
    run = load_run(run_folder(tmp_path))
    assert [r.id for r in run.records] == [r.id for r in records()]
    failing = [r for r in run.records if r.verdict == "fail"]
    assert all(run.blocks_path(r) and os.path.exists(run.blocks_path(r)) for r in failing)
    assert run.info["seconds"] == 603.1


def test_without_report_json_the_record_lines_are_read_and_a_half_written_last_line_ignored(tmp_path):
    folder = run_folder(tmp_path, report=False)
    lines = (tmp_path / "records.jsonl").read_text().splitlines()
    again = json.dumps({"$report_type": "CaseRecord", **records()[0].to_json(), "verdict": "fail"})
    (tmp_path / "records.jsonl").write_text("\n".join([*lines[:-1], again, '{"$report_type": "CaseRe']))
    run = load_run(folder)
    assert len(run.records) == len(records())  # the case recorded twice counts once: its last record
    assert run.records[0].verdict == "fail" and run.info["mode"] == "fast"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such report or run folder"),
        ("not json", "is not JSON"),
        ('{"summary": {}}', 'no "cases" list'),
        ('{"cases": [{"id": "nope"}]}', "case 1 is not a case record"),
    ],
)
def test_bad_paths_raise_one_line_errors(tmp_path, content, message):
    path = tmp_path / "r.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(LoadError, match=message):
        load_run(str(path))


def test_a_folder_that_is_not_a_run(tmp_path):
    with pytest.raises(LoadError, match="not a run folder"):
        load_run(str(tmp_path))
