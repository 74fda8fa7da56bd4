"""Reports that know the history (``--history STORE``): compare and the run's summary mark each
failure new, failing since NIGHT or flaky; the HTML report gains a trends section, checked in
headless Chromium like the report itself."""

from __future__ import annotations

import json
import os

from distcheck.cli import main
from tests.history.runs import night, run_folder
from tests.reports.test_html import _browse, _Page, _rows

PATTERNS = {"new": "PPPPPF", "since": "PPPFFF", "flaky": "PFPFPF", "fine": "PPPPPP"}


def _nights(tmp_path, count: int = 6) -> list[str]:
    return [
        run_folder(tmp_path / f"run{n}", n, {op: "pass" if p[n] == "P" else "fail" for op, p in PATTERNS.items()})
        for n in range(count)
    ]


def _stored(tmp_path, capsys, folders: list[str]) -> str:
    store = str(tmp_path / "history")
    assert main(["history", store, *folders]) == 0
    capsys.readouterr()
    return store


def _id(op: str) -> str:
    return f"torch-opinfo::{op}::float64::sample0::grad"


def test_compare_marks_new_failing_since_and_flaky(tmp_path, capsys):
    folders = _nights(tmp_path)
    store = _stored(tmp_path, capsys, folders[:5])  # tonight's run is not stored yet: compare reads it as well
    assert main(["compare", folders[4], folders[5], "--history", store, "--format", "json"]) == 1
    groups = json.loads(capsys.readouterr().out)["groups"]
    marks = {c["id"]: c.get("history") for group in groups.values() for c in group}
    assert marks == {
        _id("new"): "new",
        _id("flaky"): "flaky (5 of the last 6 nights)",
        _id("since"): f"failing since {night(3)}",
    }
    main(["compare", folders[4], folders[5], "--history", store])
    out = capsys.readouterr().out
    assert f"{_id('since')}  [fail → fail; failing since {night(3)}]" in out
    assert f"{_id('new')}  [pass → fail; new]" in out
    assert len(os.listdir(tmp_path / "history" / "runs")) == 5  # compare adds nothing


def test_compare_without_history_is_unchanged(tmp_path, capsys):
    folders = _nights(tmp_path, 2)
    main(["compare", folders[0], folders[1], "--format", "json"])
    assert all("history" not in c for g in json.loads(capsys.readouterr().out)["groups"].values() for c in g)


def test_compare_with_a_store_that_is_not_there(tmp_path, capsys):
    folders = _nights(tmp_path, 2)
    assert main(["compare", folders[0], folders[1], "--history", str(tmp_path / "nowhere")]) == 2
    assert "no history store at" in capsys.readouterr().err


def test_report_adds_the_run_and_marks_its_summary(tmp_path, capsys):
    folders = _nights(tmp_path)
    store = _stored(tmp_path, capsys, folders[:5])
    assert main(["report", folders[5], "--history", store]) == 0
    out, err = capsys.readouterr()
    assert f"history: the run is added to {store}" in err
    assert f"FAIL {_id('new')} (0.10 s) [new]" in out
    assert f"FAIL {_id('since')} (0.10 s) [failing since {night(3)}]" in out
    assert f"FAIL {_id('flaky')} (0.10 s) [flaky (5 of the last 6 nights)]" in out
    assert len(os.listdir(tmp_path / "history" / "runs")) == 6
    assert main(["report", folders[5], "--history", store]) == 0
    assert "history: the run is already in" in capsys.readouterr().err


def test_an_interrupted_run_is_marked_but_not_added(tmp_path, capsys):
    folders = _nights(tmp_path, 5)
    store = _stored(tmp_path, capsys, folders)
    stopped = run_folder(tmp_path / "stopped", 5, {"since": "fail", "new": "fail"}, finished=False)
    assert main(["report", stopped, "--history", store]) == 0
    out, err = capsys.readouterr()
    assert "the run is not finished: not added" in err and "INCOMPLETE" in out
    assert f"{_id('since')} (0.10 s) [failing since {night(3)}]" in out and f"{_id('new')} (0.10 s) [new]" in out
    assert len(os.listdir(tmp_path / "history" / "runs")) == 5


def test_the_html_report_gains_a_trends_section_in_a_real_browser(tmp_path, capsys):
    folders = _nights(tmp_path)
    store = _stored(tmp_path, capsys, folders[:5])
    page = tmp_path / "report.html"
    assert main(["report", folders[5], "--history", store, "--html", str(page)]) == 0
    text = page.read_text()
    assert "href='#trends'" in text and "<section id='trends'" in text
    dom, log = _browse(tmp_path, f"file://{page}")
    assert "CONSOLE" not in log and "Uncaught" not in log, log
    assert len(_rows(dom)) == 4  # the report's own table still works
    svgs = _Page(dom).all("svg")
    assert {a["class"] for a in svgs} == {"chart", "spark"}
    sparks = [a for a in svgs if a["class"] == "spark"]
    assert {a["aria-label"].split(" night")[0] for a in sparks} == {_id("new"), _id("since"), _id("flaky")}
    assert dom.count("<rect") >= 6 * 4  # a bar a night: the chart's, and each sparkline's


def test_the_trends_page_alone_in_a_real_browser(tmp_path, capsys):
    page = tmp_path / "trends.html"
    assert main(["history", str(tmp_path / "history"), *_nights(tmp_path), "--html", str(page)]) == 0
    dom, log = _browse(tmp_path, f"file://{page}")
    assert "CONSOLE" not in log and "Uncaught" not in log, log
    assert "Trends: 6 night(s)" in dom and "Flakiest" in dom and "Most slowed" in dom


def test_the_run_compared_makes_its_night_even_if_a_later_run_is_stored(tmp_path, capsys):
    folders = _nights(tmp_path)
    later = run_folder(tmp_path / "later", 5, {op: "pass" for op in PATTERNS}, hour=9)  # the same night, fixed
    store = _stored(tmp_path, capsys, [*folders[:5], later])
    assert main(["compare", folders[4], folders[5], "--history", store, "--format", "json"]) == 1
    marks = {c["id"]: c.get("history") for g in json.loads(capsys.readouterr().out)["groups"].values() for c in g}
    assert marks[_id("since")] == f"failing since {night(3)}" and marks[_id("new")] == "new"


def test_a_run_with_a_bad_store_stops_before_it_starts(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    out = tmp_path / "run"
    run = ["run", "--suite", "tests.history.series_suite:suite", "--serial", "--out", str(out)]
    code = main([*run, "--history", str(tmp_path / "file")])
    assert code == 2 and not out.exists()
    assert "is a file, not a history store (a folder)" in capsys.readouterr().err
