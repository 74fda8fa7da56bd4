"""bench_plugin on a tiny test file of our own: every configuration runs it, the outcomes are
compared test by test, and a configuration that changes an outcome is named (exit 1)."""

from __future__ import annotations

import json

import pytest

from benchmarks.bench_plugin import Run, differences, main, pytest_command

TINY = """
import os

import pytest
import torch
from torch.autograd import gradcheck


def test_sin():
    assert gradcheck(torch.sin, (torch.randn(4, dtype=torch.float64, requires_grad=True),))


@pytest.mark.xfail(strict=True)
def test_wrong_backward():  # x * x.detach(): its analytical derivative is x, the numerical one 2x
    assert gradcheck(lambda x: x * x.detach(), (torch.randn(3, dtype=torch.float64, requires_grad=True),))


def test_skipped():
    pytest.skip("not here")
"""
UNDER_XDIST = "\n\ndef test_not_under_xdist():\n    assert 'PYTEST_XDIST_WORKER' not in os.environ\n"


@pytest.mark.slow
def test_every_configuration_gives_plain_pytests_outcomes(tmp_path, capsys):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_tiny.py").write_text(TINY)
    figures = tmp_path / "figures.json"
    argv = ["--pytorch-tests", str(tmp_path / "tests"), "--file", "test_tiny.py::sin or wrong or skipped"]
    argv += ["--configs", "plain,xdist1,plugin", "--modes", "fast", "--executor", "serial", "--json", str(figures)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "OK: the same outcomes in every configuration" in out
    assert "distcheck: 2 gradient check(s) ran through distcheck (serial)" in out  # the plugin's line
    assert "1 pass, 1 skipped, 1 xfail" in out
    runs = json.loads(figures.read_text())["runs"]
    assert [r["config"] for r in runs] == ["plain", "-n 2, 1 thread", "plugin"]
    assert all(r["outcomes"] == {"pass": 1, "skipped": 1, "xfail": 1} for r in runs), runs
    assert not list(tmp_path.glob("tests/*.xml"))  # reports go to a temporary folder, not the tests'


@pytest.mark.slow
def test_a_configuration_that_changes_an_outcome_is_named(tmp_path, capsys):
    (tmp_path / "test_tiny.py").write_text(TINY + UNDER_XDIST)
    argv = ["--pytorch-tests", str(tmp_path), "--file", "test_tiny.py::xdist", "--configs", "plain,xdist"]
    assert main([*argv, "--modes", "slow"]) == 1
    out = capsys.readouterr().out
    assert "DIFFERENT test_tiny.py slow -n 2: test_tiny.test_not_under_xdist: plain pass, fail" in out


def test_a_run_that_does_not_complete_is_a_difference():
    plain = Run("f", "fast", "plain", "", 1.0, 0, {("C", "t"): "pass"})
    assert differences(plain, Run("f", "fast", "plugin", "", 1.0, 1, {("C", "t"): "pass"})) == []
    crashed = differences(plain, Run("f", "fast", "plugin", "", 1.0, 3, {}))
    assert crashed == ["plugin: pytest exited 3", "plugin: C.t: plain pass, absent"]


def test_the_commands():
    command = pytest_command("a.py", "grad", "plugin -n 2", "r.xml", "ray")
    assert command[-8:] == ["a.py", "-k", "grad", "-n", "2", "--distcheck-torch", "--distcheck-executor", "ray"]
    assert "-n" not in pytest_command("a.py", "", "plain", "r.xml", "ray")


@pytest.mark.slow
def test_rounds_alternate_and_medians_are_compared(tmp_path, capsys):
    (tmp_path / "test_tiny.py").write_text(TINY)
    figures = tmp_path / "figures.json"
    argv = ["--pytorch-tests", str(tmp_path), "--file", "test_tiny.py::sin", "--configs", "plain,plugin"]
    argv += ["--modes", "fast", "--executor", "serial", "--repeat", "2", "--json", str(figures)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "median of 2" in out and out.count("rounds: ") == 2
    data = json.loads(figures.read_text())
    # the second round starts one configuration later: plugin, then plain
    order = [(r["config"], r["round"]) for r in data["runs"]]
    assert order == [("plain", 0), ("plugin", 0), ("plugin", 1), ("plain", 1)]
    plain = sorted(r["seconds"] for r in data["runs"] if r["config"] == "plain")
    (median,) = [m["seconds"] for m in data["medians"] if m["config"] == "plain"]
    assert median == sum(plain) / 2


def test_repeat_must_be_positive(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--pytorch-tests", str(tmp_path), "--file", "x.py", "--repeat", "0"])
    assert "--repeat must be at least 1" in capsys.readouterr().err
