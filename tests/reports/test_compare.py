"""``distcheck compare``: groups, formats, exit statuses."""

from __future__ import annotations

import json

import pytest

from distcheck.cli import main
from distcheck.records.case_record import CaseRecord
from distcheck.reports.compare import compare
from distcheck.reports.load import load_run
from tests.reports.runs import case, run_folder, write_report

OLD = [
    CaseRecord(case("a"), "pass", "", 0.1, 1),  # -> fail: new failure
    CaseRecord(case("b"), "fail", "wrong\nsecond line", 0.1, 1),  # -> pass: fixed
    CaseRecord(case("c"), "error", "old message", 0.1, 1),  # -> error: still failing
    CaseRecord(case("d"), "pass", "", 1.0, 1),  # -> pass, 3 s: slower
    CaseRecord(case("e"), "pass", "", 0.1, 1),  # removed
    CaseRecord(case("f"), "pass", "", 0.1, 1),  # -> flaky: new failure, newly flaky
    CaseRecord(case("g"), "skipped", "why", 0.0, 0),  # -> timeout: new failure
    CaseRecord(case("h"), "pass", "", 0.2, 1),  # -> pass, 0.9 s: slower by 4.5x but under 1 s
]
NEW = [
    CaseRecord(case("a"), "fail", "Jacobian mismatch for output 0\nnumerical:...", 0.1, 1),
    CaseRecord(case("b"), "pass", "", 0.1, 1),
    CaseRecord(case("c"), "error", "new message", 0.1, 1),
    CaseRecord(case("d"), "pass", "", 3.0, 1),
    CaseRecord(case("f"), "flaky", "failed once", 0.1, 1),
    CaseRecord(case("g"), "timeout", "stopped after 600 s", 600.0, 1),
    CaseRecord(case("h"), "pass", "", 0.9, 1),
    CaseRecord(case("z"), "fail", "brand new case", 0.1, 1),  # added, failing: a new failure too
    CaseRecord(case("y"), "error", "gradcheck raised ValueError: kaboom", 0.1, 1),  # added, erring: the same
    CaseRecord(case("x"), "pass", "", 0.1, 1),  # added, passing
]


def _ids(comparison, group):
    return [c.id.split("::")[1] for c in comparison.groups[group]]


def test_groups(tmp_path):
    comparison = compare(
        load_run(write_report(tmp_path / "o.json", OLD)), load_run(write_report(tmp_path / "n.json", NEW))
    )
    assert _ids(comparison, "new_failures") == ["a", "f", "g", "z", "y"]
    assert _ids(comparison, "fixed") == ["b"]
    assert _ids(comparison, "still_failing") == ["c"]
    assert _ids(comparison, "newly_flaky") == ["f"]
    assert _ids(comparison, "slower") == ["d"]
    assert _ids(comparison, "added") == ["z", "y", "x"]
    assert _ids(comparison, "removed") == ["e"]
    change = comparison.groups["new_failures"][0]
    assert (change.old, change.new, change.message) == ("pass", "fail", "Jacobian mismatch for output 0")
    assert comparison.groups["still_failing"][0].message == "new message"
    assert comparison.groups["fixed"][0].message == "wrong"  # the old message: the new run has none


def test_exit_statuses_and_formats(tmp_path, capsys):
    old, new = write_report(tmp_path / "o.json", OLD), write_report(tmp_path / "n.json", NEW)
    assert main(["compare", old, new]) == 1
    text = capsys.readouterr().out
    assert "New failures: 5" in text and "torch-opinfo::a::float64::sample0::grad  [pass → fail]" in text
    assert "Much slower (> 2× and > 1 s): 1" in text and "[1.00 s → 3.00 s]" in text
    assert main(["compare", old, new, "--fail-on", "none"]) == 0
    assert main(["compare", new, new]) == 0  # nothing new
    assert main(["compare", new, new, "--fail-on", "any"]) == 1  # but failing cases
    assert main(["compare", old, old, "--fail-on", "any"]) == 1
    capsys.readouterr()
    assert main(["compare", old, new, "--format", "markdown", "--fail-on", "none"]) == 0
    markdown = capsys.readouterr().out
    assert (
        "### New failures (5)" in markdown and "| `torch-opinfo::a::float64::sample0::grad` | pass → fail |" in markdown
    )
    assert main(["compare", old, new, "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["counts"]["new_failures"] == 5 and data["groups"]["added"][0]["new"] == "fail"
    assert data["differences"] == []  # the same suite and mode; no selection recorded


def test_run_folders_compare_like_reports(tmp_path, capsys):
    old, new = run_folder(tmp_path / "old"), run_folder(tmp_path / "new")
    assert main(["compare", old, new]) == 0
    assert "Still failing: 4" in capsys.readouterr().out


def test_a_new_failing_op_fails_a_nightly_even_as_an_added_case(tmp_path, capsys):
    """Two runs of different suites share no case: every NEW case is added, and a failing one is
    a new failure (exit 1); the report says first that the suites differ."""
    old = write_report(tmp_path / "o.json", [CaseRecord(case("a"), "pass", "", 0.1, 1)])
    added = [CaseRecord(case("a", suite="my-kernels"), "error", "gradcheck raised ValueError: kaboom", 0.1, 1)]
    new = write_report(tmp_path / "n.json", added, suite="my-kernels")
    assert main(["compare", old, new]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[2:4] == [
        "The runs ran different things; added and removed cases come from that as much as from the code:",
        "  - suite: torch-opinfo in OLD, my-kernels in NEW",
    ]
    assert "New failures: 1" in lines and "  my-kernels::a::float64::sample0::grad  [error]" in lines


def test_differences_in_mode_selection_and_completeness(tmp_path, capsys):
    chosen = {"checks": ["grad"], "dtypes": None, "ops": ["add"], "substring": None}
    old = write_report(tmp_path / "o.json", [], mode="fast", selection=chosen)
    new_selection = {**chosen, "ops": ["add", "sub"], "substring": "sample0"}
    new = write_report(tmp_path / "n.json", [], mode="slow", selection=new_selection, complete=False)
    assert main(["compare", old, new, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["differences"] == [
        "mode: fast in OLD, slow in NEW",
        "selection ops: add in OLD, add,sub in NEW",
        "selection substring: all in OLD, sample0 in NEW",
        "NEW is incomplete (interrupted): the cases it did not reach are missing from it",
    ]
    assert main(["compare", old, new, "--format", "markdown"]) == 0
    assert "> - mode: fast in OLD, slow in NEW" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["compare", "nope.json", "nope.json"], "no such report or run folder: nope.json"),
        (["compare", "a", "b", "--format", "html"], "invalid choice: 'html'"),
        (["compare", "a", "b", "--fail-on", "some"], "invalid choice: 'some'"),
    ],
)
def test_usage_errors(argv, message, capsys):
    try:
        status = main(argv)
    except SystemExit as e:  # argparse
        status = e.code
    assert status == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
