"""An ``error``'s traceback in every report: the console summary (its last lines under the
ERROR line), the JSON report (the record's ``traceback``), JUnit (the ``<error>``'s text) and
HTML (folded in the failure card, escaped); ``distcheck report`` shows it from a run folder;
runs recorded before the field load as they were."""

from __future__ import annotations

import dataclasses
import json
import os
import xml.etree.ElementTree as ET

from distcheck.cli import main
from distcheck.cli.report import loaded_result
from distcheck.reports import console
from distcheck.reports.load import load_run
from tests.reports.runs import case, records, run_folder, write_report
from tests.reports.test_junit import SCHEMA

SPEC = "tests.runner.raising_suite:suite"
KABOOM = "raising::kaboom::float64::sample0::grad"
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/home/me/kernels.py", line 7, in scaled <b>\n'
    "    raise RuntimeError('<script>alert(1)</script>')\n"
    "RuntimeError: boom"
)


def _with_traceback():
    """The made-up run's records, its error with a traceback (that HTML must escape)."""
    return [dataclasses.replace(r, traceback=TRACEBACK) if r.verdict == "error" else r for r in records()]


def _error_text(junit_path) -> str:
    """The text of the JUnit file's first ``<error>``."""
    return next(ET.parse(junit_path).getroot().iter("error")).text


def test_a_run_shows_the_traceback_in_every_report(tmp_path, capsys):
    out, report, junit, page = tmp_path / "run", tmp_path / "r.json", tmp_path / "j.xml", tmp_path / "r.html"
    argv = ["run", "--suite", SPEC, "--ops", "kaboom", "--serial", "--out", str(out), "--json", str(report)]
    assert main([*argv, "--junit", str(junit), "--html", str(page)]) == 1
    summary = capsys.readouterr().out.splitlines()
    at = summary.index(next(line for line in summary if line.startswith(f"  ERROR {KABOOM}")))
    shown = summary[at + 1 : summary.index(next(line for line in summary[at:] if "rerun:" in line))]
    assert shown[0] == "      gradcheck raised ValueError: kaboom" and shown[1].startswith("      traceback")
    assert "in explode" in "\n".join(shown) and shown[-1] == "        ValueError: kaboom", shown
    assert shown[2].startswith("          File ") and not any("^^^" in line for line in shown)  # whole frames
    (record,) = json.loads(report.read_text())["cases"]
    assert "in explode\n" in record["traceback"] and record["traceback"].endswith("ValueError: kaboom")
    SCHEMA.validate(str(junit))
    text = _error_text(junit)
    assert record["traceback"] in text and text.index("kaboom") < text.index("Traceback") < text.index("reproduce:")
    assert "<details><summary>Traceback (" in page.read_text() and "in explode" in page.read_text()


def test_report_of_a_run_folder_shows_it(tmp_path):
    for with_report in (True, False):  # report.json, or the records of an interrupted run
        folder = run_folder(tmp_path / str(with_report), _with_traceback(), report=with_report)
        junit, page = tmp_path / "j.xml", tmp_path / "r.html"
        assert main(["report", folder, "--junit", str(junit), "--html", str(page)]) == 0
        SCHEMA.validate(str(junit))
        assert TRACEBACK in _error_text(junit)
        text = page.read_text()
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "<script>alert" not in text
        assert "scaled &lt;b&gt;" in text and "<details><summary>Traceback (4 lines)</summary>" in text
        summary = console.summary(loaded_result(load_run(folder)))
        end = "\n".join(f"        {line}" for line in TRACEBACK.split("\n")[1:])  # from its first frame
        assert "      traceback (its end, of 4 lines in the record):\n" + end in summary


def test_runs_recorded_without_tracebacks_still_load_and_compare(tmp_path, capsys):
    old = write_report(tmp_path / "old.json", records())
    assert "traceback" not in open(old).read()
    folder = run_folder(tmp_path / "new", _with_traceback(), report=False)
    with open(os.path.join(folder, "records.jsonl"), "a") as lines:  # a resumed run's older line
        lines.write(json.dumps({"$report_type": "CaseRecord", **records()[0].to_json()}) + "\n")
    assert [r.traceback for r in load_run(old).records] == [None] * len(records())
    loaded = {r.case: r.traceback for r in load_run(folder).records}
    assert loaded[case("sin", "gradgrad", sample=3)] == TRACEBACK and loaded[case("add")] is None
    assert main(["compare", old, folder]) == 0
    assert "New failures: 0" in capsys.readouterr().out
