"""``distcheck run --junit --html`` and ``distcheck report``: the reports of a real run, with the
failure blocks the workers kept (serially and on Ray)."""

from __future__ import annotations

import os
import re

import pytest

import distcheck.suites
from distcheck.cli import main
from distcheck.reports import html
from distcheck.reports.load import load_run
from distcheck.runner import RunOptions, run_suite
from distcheck.storage import blocks as artifacts
from distcheck.suites import Selection
from tests.reports.runs import run_folder
from tests.reports.test_junit import SCHEMA
from tests.runner.fake_suite import FakeSuite


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setitem(distcheck.suites._SUITES, "fake", "tests.runner.fake_suite:FakeSuite")


def test_run_writes_junit_and_html_with_pictures_of_its_failures(fake, tmp_path, capsys):
    junit, page = tmp_path / "junit.xml", tmp_path / "report.html"
    argv = ["run", "--suite", "fake", "--ops", "sin,wrong,crash,xfail", "--checks", "grad,gradgrad", "--serial"]
    argv += ["--out", str(tmp_path / "run")]
    assert main([*argv, "--junit", str(junit), "--html", str(page)]) == 1
    out = capsys.readouterr().out
    assert "repro: distcheck repro fake::wrong::float64::sample0::grad > repro.py && python repro.py" in out
    assert f"JUnit XML: {junit}" in out and f"HTML report: {page}" in out
    SCHEMA.validate(str(junit))
    text = page.read_text()
    assert len(re.findall(r'<img class="heatmap"', text)) == 1  # wrong's grad (its gradgrad passes)
    assert "fake::crash::float64::sample0::grad" in text and "distcheck run --suite fake" in text


def test_report_of_a_run_folder(tmp_path, capsys):
    folder = run_folder(tmp_path / "run")
    junit, page = tmp_path / "j.xml", tmp_path / "r.html"
    assert main(["report", folder, "--junit", str(junit), "--html", str(page)]) == 0
    SCHEMA.validate(str(junit))
    assert page.read_text().count('<img class="heatmap"') == 2
    assert main(["report", folder]) == 2
    assert "nothing to write" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "nope"), "--html", str(page)]) == 2


@pytest.mark.slow
def test_workers_on_ray_send_the_blocks_and_the_driver_stores_them(ray_cluster, tmp_path):
    suite = FakeSuite(ops=("sin", "wrong"))
    store = artifacts.BlockStore(str(tmp_path / "blocks"))
    result = run_suite(suite, Selection(checks=("grad",)), RunOptions(timeout=60), blocks=store)
    wrong = [r for r in result.records if r.case.op == "wrong"]
    assert [r.verdict for r in wrong] == ["fail"]
    assert all(r.blocks and os.path.exists(tmp_path / "blocks" / r.blocks) for r in wrong)
    assert all(r.blocks is None for r in result.records if r.case.op == "sin")
    kept = artifacts.load(str(tmp_path / "blocks" / wrong[0].blocks))
    assert kept.shape == kept.window.numerical.shape == kept.window.analytical.shape
    run = load_run(run_folder(tmp_path / "folder"))  # and a page of them
    html.write_file(str(tmp_path / "r.html"), run)
