"""The command line: exit statuses, usage errors without tracebacks, list, run, JSON."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import distcheck.suites
from distcheck.cli import main


@pytest.fixture
def fake(monkeypatch):
    """Suite ``fake`` (tests/runner/fake_suite.py) registered like a built-in one."""
    monkeypatch.setitem(distcheck.suites._SUITES, "fake", "tests.runner.fake_suite:FakeSuite")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "--suite", "nope", "--serial"], "unknown suite 'nope'"),
        (["run", "--ops", "add", "--dtypes", "float16", "--serial"], "unknown dtype 'float16'"),
        (["list", "--ops", "addd"], "unknown op 'addd' in op_db (did you mean add"),
        (["list", "--ops", "add", "-k", "no-such-case"], "no case matches the selection"),
    ],
)
def test_usage_errors(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "--checks", "grad,hessian"], "unknown check kind 'hessian'"),
        (["run", "--mode", "medium"], "invalid choice: 'medium'"),
        (["run", "--serial", "--address", "auto"], "not allowed with argument --serial"),
        (["run", "--timeout", "-3"], "must not be negative"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_argument_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_list(capsys):
    assert main(["list", "--ops", "cdist", "--dtypes", "float64", "--checks", "grad,gradgrad", "--max-cases", "3"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "torch-opinfo::cdist::float64::sample0::grad",
        "torch-opinfo::cdist::float64::sample1::grad",
        "torch-opinfo::cdist::float64::sample2::grad",
    ]
    assert main(["list", "--ops", "cdist", "--dtypes", "float64", "--checks", "gradgrad"]) == 0
    assert capsys.readouterr().out == (
        "torch-opinfo::cdist::float64::gradgrad\t[skipped] "
        "Op claims it doesn't support gradgrad. This is not verified.\n"
    )


def test_run_passing_cases(fake, capsys, tmp_path):
    report = tmp_path / "run.json"
    assert (
        main(["run", "--suite", "fake", "--ops", "sin,xfail", "--checks", "grad", "--serial", "--json", str(report)])
        == 0
    )
    captured = capsys.readouterr()
    assert "distcheck: suite fake (fast mode) on serial, 1 worker(s)" in captured.err
    assert "progress: " in captured.err  # stderr is not a terminal here: plain lines
    assert captured.out.splitlines()[-2] == "OK" and "JSON report" in captured.out
    data = json.loads(report.read_text())
    assert [(c["id"], c["verdict"]) for c in data["cases"]] == [
        ("fake::sin::float64::sample0::grad", "pass"),
        ("fake::xfail::float64::grad", "xfail"),
    ]
    assert data["summary"]["command"][:2] == ["distcheck", "run"]


def test_run_with_failures_exits_1(fake, capsys):
    assert main(["run", "--suite", "fake", "--ops", "sin,wrong", "--checks", "grad", "--serial"]) == 1
    out = capsys.readouterr().out
    assert "FAIL fake::wrong::float64::sample0::grad" in out and out.rstrip().endswith("FAILED")


def test_python_dash_m():
    command = [sys.executable, "-m", "distcheck", "list", "--ops", "add", "--dtypes", "float64", "--max-cases", "2"]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "torch-opinfo::add::float64::sample0::grad",
        "torch-opinfo::add::float64::sample1::grad",
    ]
