"""``distcheck history``: adding runs (idempotent, any order, finished runs only), the three
formats, the filters, and bad input (one line on stderr, exit status 2)."""

from __future__ import annotations

import json
import os
import re

import pytest

from distcheck.cli import main
from distcheck.history.store import MARKER
from tests.history.runs import night, run_folder

PATTERNS = {"sin": "PPPFFF", "cos": "PFPFPF", "tan": "PPPPPP", "mm": "PPPPPP"}
SECONDS = {"mm": [0.1, 0.1, 0.1, 0.1, 0.1, 3.0]}


@pytest.fixture
def nights(tmp_path) -> list[str]:
    folders = []
    for n in range(6):
        verdicts = {op: "pass" if p[n] == "P" else "fail" for op, p in PATTERNS.items()}
        seconds = {op: times[n] for op, times in SECONDS.items()}
        versions = {"distcheck": "0.1.0", "torch": "2.12.0" if n < 3 else "2.13.0", "python": "3.12.3"}
        folders.append(run_folder(tmp_path / f"run{n}", n, verdicts, seconds, versions=versions))
    return folders


# what a Ray the session's other tests started prints into this process, asynchronously, on
# either stream (its log monitor: "(raylet) A worker died ...", "(pid=...) ...")
_RAY_LINE = re.compile(r"^(\x1b\[[0-9;]*m)?\((raylet|pid=|\w+ pid=)")


def history(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["history", *args])
    out, err = capsys.readouterr()
    out = "".join(line for line in out.splitlines(keepends=True) if not _RAY_LINE.match(line))
    return code, out, err


def ours(err: str) -> list[str]:
    """distcheck's lines on stderr (a Ray the session's other tests started may print there too)."""
    return [line for line in err.splitlines() if line.startswith("distcheck") or "Traceback" in line]


def test_text_names_since_when_how_flaky_and_what_got_slower(tmp_path, nights, capsys):
    store = str(tmp_path / "history")
    code, out, err = history(capsys, store, *nights[3:], *nights[:3])  # out of order
    assert code == 0, err
    assert f"6 night(s) of fast-mode runs, {night(0)} to {night(5)}" in out
    lines = out.splitlines()
    sin = next(line for line in lines if "::sin::" in line)
    assert f"...FFF  failing since {night(3)} (3 night(s)), last passed {night(2)}" in sin
    assert "changed since it passed: torch 2.12.0 → 2.13.0" in lines[lines.index(sin) + 1]
    assert "flaky or flipped on 5 of the last 6 nights (flaky rate 0.83)" in out
    assert "3.00 s against a median of 0.10 s (30.0×)" in out
    assert "::tan::" not in out  # passing, steady: not shown without --all
    assert f"{night(3)}      4     2     2  torch 2.12.0 → 2.13.0" in out


def test_json_is_the_object_of_the_issue(tmp_path, nights, capsys):
    store = str(tmp_path / "history")
    history(capsys, store, *nights)
    code, out, _ = history(capsys, store, "--format", "json")
    data = json.loads(out)
    assert data["nights"] == [night(n) for n in range(6)]
    sin = data["cases"]["torch-opinfo::sin::float64::sample0::grad"]
    assert sin["verdicts"] == ["pass"] * 3 + ["fail"] * 3
    assert (sin["first_failing"], sin["last_passing"]) == (night(3), night(2))
    assert sin["flaky_rate"] == round(1 / 6, 4) and sin["versions_changed"] == {"torch": ["2.12.0", "2.13.0"]}
    mm = data["cases"]["torch-opinfo::mm::float64::sample0::grad"]
    assert (mm["median_seconds"], mm["last_seconds"], mm["slower"]) == (0.1, 3.0, True)
    assert set(data["cases"]) == {f"torch-opinfo::{op}::float64::sample0::grad" for op in ("sin", "cos", "mm")}
    assert {"verdicts", "first_failing", "last_passing", "flaky_rate", "median_seconds", "last_seconds"} <= set(sin)
    assert data["counts"][night(3)] == {"pass": 2, "fail": 2}


def test_markdown(tmp_path, nights, capsys):
    code, out, _ = history(capsys, str(tmp_path / "history"), *nights, "--format", "markdown")
    assert out.startswith("## History in") and "### Failing (2)" in out
    assert f"| `torch-opinfo::sin::float64::sample0::grad` | `...FFF` | failing since {night(3)}" in out


def test_adding_again_changes_nothing(tmp_path, nights, capsys):
    store = str(tmp_path / "history")
    first = history(capsys, store, *nights, "--format", "json")[1]
    assert history(capsys, store, *nights, nights[2], "--format", "json")[1] == first
    assert len(os.listdir(tmp_path / "history" / "runs")) == 6


def test_filters(tmp_path, nights, capsys):
    store = str(tmp_path / "history")
    history(capsys, store, *nights)
    cases = lambda *a: set(json.loads(history(capsys, store, "--format", "json", *a)[1])["cases"])  # noqa: E731
    ids = {op: f"torch-opinfo::{op}::float64::sample0::grad" for op in PATTERNS}
    assert cases("--ops", "sin,tan") == {ids["sin"]}
    assert cases("--ops", "sin,tan", "--all") == {ids["sin"], ids["tan"]}
    assert cases("--verdict", "pass") == {ids["tan"], ids["mm"]}
    assert cases("--checks", "gradgrad") == set()
    assert cases("--suite", "other") == set()
    assert cases("--nights", "2") == {ids["sin"], ids["cos"]}  # mm's median of two nights is not 2× under 3 s
    data = json.loads(history(capsys, store, "--format", "json", "--nights", "2")[1])
    assert data["nights"] == [night(4), night(5)]
    assert json.loads(history(capsys, store, "--format", "json", "--mode", "slow")[1])["nights"] == []


def test_per_pytorch_test(tmp_path, nights, capsys):
    code, out, _ = history(capsys, str(tmp_path / "history"), *nights, "--junit-names", "pytorch")
    assert code == 0
    assert f"TestBwdGradientsCPU.test_fn_grad_sin_cpu_float64  ...FFF  failing since {night(3)}" in out


def test_only_finished_runs_count(tmp_path, nights, capsys):
    store = str(tmp_path / "history")
    killed = run_folder(tmp_path / "killed", 6, {"sin": "pass"}, finished=False, report=False)
    stopped = run_folder(tmp_path / "stopped", 6, {"sin": "pass"}, finished=False)
    for unfinished, why in ((killed, "not finished"), (stopped, r"interrupted \(SIGINT\)")):
        code, out, err = history(capsys, store, *nights, unfinished)
        assert code == 2 and out == ""
        assert len(ours(err)) == 1 and f"{unfinished} is a run that is {why.replace(chr(92), '')}" in err
        assert f"distcheck run --resume {unfinished}" in err
    assert not os.path.exists(store)  # nothing added: every run is checked first


def test_empty_history(tmp_path, capsys):
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / MARKER).write_text(json.dumps({"format": "distcheck-history", "version": 1}))
    code, out, _ = history(capsys, str(tmp_path / "history"))
    assert code == 0 and out.strip() == f"History in {tmp_path / 'history'}: no finished runs yet"
    code, out, _ = history(capsys, str(tmp_path / "history"), "--format", "json")
    assert json.loads(out)["nights"] == [] and json.loads(out)["cases"] == {}


def _one_line_error(capsys, *args: str) -> str:
    code, out, err = history(capsys, *args)
    assert code == 2 and out == "" and len(ours(err)) == 1 and "Traceback" not in err
    return err


def test_bad_input_is_one_line_and_exit_status_2(tmp_path, nights, capsys):
    (tmp_path / "not-a-run").mkdir()
    (tmp_path / "junk.json").write_text("[1, 2]")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x").write_text("x")
    store = str(tmp_path / "history")
    assert "is a folder without report.json, records.jsonl or records/: not a run folder" in _one_line_error(
        capsys, store, str(tmp_path / "not-a-run")
    )
    assert "not a distcheck report" in _one_line_error(capsys, store, str(tmp_path / "junk.json"))
    assert "no such report or run folder" in _one_line_error(capsys, store, str(tmp_path / "missing"))
    assert "no history store at" in _one_line_error(capsys, str(tmp_path / "nowhere"))
    assert "a folder of other things, not a history store" in _one_line_error(capsys, str(tmp_path / "other"))
    assert "is a file, not a history store" in _one_line_error(capsys, str(tmp_path / "junk.json"), nights[0])
    assert "give one of them" in _one_line_error(capsys, store, nights[0], "--all", "--verdict", "fail")


def test_a_report_without_a_start_time(tmp_path, capsys):
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"summary": {"suite": "torch-opinfo", "mode": "fast", "complete": True}, "cases": []}))
    err = _one_line_error(capsys, str(tmp_path / "history"), str(old))
    assert "does not say when the run started: add its run folder" in err


def test_a_json_report_is_added_as_its_run(tmp_path, nights, capsys):
    store = str(tmp_path / "history")
    history(capsys, store, os.path.join(nights[0], "report.json"))
    history(capsys, store, nights[0])
    assert len(os.listdir(tmp_path / "history" / "runs")) == 1


def test_the_trends_page(tmp_path, nights, capsys):
    page = tmp_path / "trends.html"
    code, out, err = history(capsys, str(tmp_path / "history"), *nights, "--html", str(page), "--format", "json")
    assert code == 0 and json.loads(out) and f"trends page: {page}" in err
    text = page.read_text()
    assert "<section id='trends'" in text and text.count('class="spark"') == 5  # 2 failing, 2 flakiest, 1 slowed
