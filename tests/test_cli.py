"""The command line: exit statuses, usage errors without tracebacks, list, run, JSON, the run
folder, resume, reruns. ``BAD_INPUTS`` is the table of bad inputs docs/running.md lists."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import distcheck.cli.arguments
import distcheck.suites
from distcheck.cli import main
from distcheck.runner import RunOptions, run_suite
from distcheck.storage.run_folder import RECORDS, read_run
from distcheck.suites import Selection, UsageError, get_suite
from tests.runner.fake_cli import SUITES


@pytest.fixture
def fake(monkeypatch):
    """Suites ``fake`` and ``naps`` (tests/runner/fake_cli.py) registered like built-in ones."""
    for name, where in SUITES.items():
        monkeypatch.setitem(distcheck.suites._SUITES, name, where)


FAKE_RUN = ["run", "--suite", "fake", "--ops", "sin,xfail", "--checks", "grad", "--serial"]


@pytest.fixture
def folders(fake, tmp_path, capsys):
    """Run folders to resume (or not): ``done`` (finished), ``cut`` (its driver killed after the
    first record), ``other`` (its records of another suite), ``junk`` (not JSON), ``empty``."""
    assert main([*FAKE_RUN, "--out", str(tmp_path / "done")]) == 0
    lines = (tmp_path / "done" / RECORDS).read_text().splitlines()
    for name, content in {
        "cut": lines[:2],
        "other": [lines[0], lines[1].replace("fake::", "torch-opinfo::")],
        "junk": ["Traceback (most recent call last):", "{}"],
        "empty": [],
    }.items():
        (tmp_path / name).mkdir()
        if content:
            (tmp_path / name / RECORDS).write_text("\n".join(content) + "\n")
    (tmp_path / "empty" / "notes.txt").write_text("")
    (tmp_path / "a-file").write_text("")
    capsys.readouterr()
    return tmp_path


# (arguments, expected message); {tmp} is the folder of the ``folders`` fixture. Every one exits 2
# with one line on stderr, before any case runs.
BAD_INPUTS = [
    (["run", "--suite", "nope", "--serial"], "unknown suite 'nope'"),
    (["run", "--ops", "add", "--dtypes", "float16", "--serial"], "unknown dtype 'float16'"),
    (["list", "--ops", "addd"], "unknown op 'addd' in op_db (did you mean add"),
    (["run", "--ops", "div"], "unknown op 'div' in op_db (did you mean div.no_rounding_mode, div.trunc_rounding"),
    (["list", "--ops", "conv2d"], "unknown op 'conv2d' in op_db (did you mean nn.functional.conv2d, "),
    (["list", "--ops", "relu"], "unknown op 'relu' in op_db (did you mean nn.functional.relu, "),
    (["list", "--ops", "add", "-k", "no-such-case"], "no case matches the selection"),
    (["run", "--suite", "fake", "--ops", "sin", "--serial", "-k", "no-such-case"], "no case matches the selection"),
    (["run", "--suite", "fake", "--ops", "sin", "-k", "sin::float32"], "no case matches"),  # Ray not started
    ([*FAKE_RUN, "--max-cases", "0"], "no case matches the selection"),
    (["run", "--checks", "grad,hessian"], "unknown check kind 'hessian'"),
    (["run", "--mode", "medium"], "invalid choice: 'medium'"),
    (["run", "--serial", "--address", "auto"], "not allowed with argument --serial"),
    (["run", "--timeout", "-3"], "must not be negative"),
    (["run", "--reruns", "twice"], "not a number: 'twice'"),
    (["run", "--ops", "", "--serial"], "argument --ops: no name in ''"),
    (["list", "--dtypes", " , "], "argument --dtypes: no name in ' , '"),
    (["run", "--checks", ""], "argument --checks: no name in ''"),
    (["run", "--timeout", "nan", "--serial"], "argument --timeout: not a finite number: 'nan'"),
    (["run", "--timeout", "inf", "--serial"], "argument --timeout: not a finite number: 'inf'"),
    (["run", "--max-jacobian-mb", "Infinity"], "not a finite number: 'Infinity'"),
    (["run", "--gpus-per-runner", "NaN"], "not a finite number: 'NaN'"),
    (["frobnicate"], "invalid choice"),
    (
        [*FAKE_RUN, "--json", "/nonexistent/dir/r.json"],
        "cannot write the JSON report to /nonexistent/dir/r.json: the folder",
    ),
    ([*FAKE_RUN, "--json", "{tmp}"], "cannot write the JSON report to {tmp}: it is a folder"),
    ([*FAKE_RUN, "--out", "{tmp}/a-file/run"], "cannot create the run folder {tmp}/a-file/run"),
    ([*FAKE_RUN, "--out", "/proc/distcheck/run"], "cannot create the run folder /proc/distcheck/run: /proc "),
    ([*FAKE_RUN, "--json", "/proc/report.json"], "cannot write the JSON report to /proc/report.json: "),
    ([*FAKE_RUN, "--out", "{tmp}/done"], "{tmp}/done already holds a run: finish it with --resume {tmp}/done"),
    (
        [*FAKE_RUN[:-1], "--address", "127.0.0.1:1"],
        "cannot reach the Ray cluster at '127.0.0.1:1' (Connection refused)",
    ),
    ([*FAKE_RUN[:-1], "--address", "headnode"], "bad Ray address 'headnode': expected host:port"),
    ([*FAKE_RUN, "--strict-flaky"], "--strict-flaky needs --reruns N"),
    (["run", "--resume", "{tmp}/missing"], "cannot resume {tmp}/missing: no such folder"),
    (["run", "--resume", "{tmp}/empty"], "cannot resume {tmp}/empty: no records.jsonl in it: not a run folder"),
    (["run", "--resume", "{tmp}/junk"], "cannot resume {tmp}/junk: records.jsonl line 1 is not JSON"),
    (["run", "--resume", "{tmp}/done"], "cannot resume {tmp}/done: the run is finished: nothing to resume"),
    (
        ["run", "--resume", "{tmp}/other"],
        "holds case torch-opinfo::sin::float64::sample0::grad of suite 'torch-opinfo'",
    ),
    (["run", "--resume", "{tmp}/cut", "--ops", "add"], "--resume takes the suite, selection and options from the run"),
    (["run", "--resume", "{tmp}/cut", "--out", "{tmp}/x", "-k", "y"], "from the run folder: drop -k, --out"),
    (["run", "--resume", "{tmp}/cut", "--reruns", "2"], "drop --reruns"),
    (["run", "--resume", "{tmp}/cut", "--no-vectorize"], "drop --no-vectorize"),
    ([*FAKE_RUN[:-1], "--policy", "fifo"], "unknown policy 'fifo' (known: default; or MODULE:CLASS)"),
    (
        [*FAKE_RUN[:-1], "--policy", "tests.nowhere:Lifo"],
        "policy 'tests.nowhere:Lifo' (tests.nowhere:Lifo) failed to load: ModuleNotFoundError",
    ),
    ([*FAKE_RUN, "--policy", "tests.runner.lifo_policy:LifoPolicy"], "--policy orders the work of a Ray run"),
    (["run", "--resume", "{tmp}/cut", "--policy", "fifo"], "drop --policy"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_INPUTS, ids=[" ".join(a) for a, _ in BAD_INPUTS])
def test_bad_inputs_fail_fast_with_one_line(folders, argv, message, capsys, monkeypatch):
    monkeypatch.chdir(folders)  # a default run folder would go here
    argv = [a.replace("{tmp}", str(folders)) for a in argv]
    try:
        status = main(argv)
    except SystemExit as e:  # argparse's errors
        status = e.code
    err = capsys.readouterr().err
    assert status == 2 and message.replace("{tmp}", str(folders)) in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err  # argparse's errors too
    assert not (folders / "runs").exists()  # nothing was run


# The same for the Python API: (call, expected message of its UsageError).
API_BAD_INPUTS = [
    (lambda tmp: RunOptions(reruns=-1), "RunOptions.reruns must not be negative"),
    (lambda tmp: RunOptions(serial=True, address="auto"), "serial=True runs in this process"),
    (lambda tmp: run_suite(get_suite("torch-opinfo"), Selection(ops=("add",)), RunOptions(policy="x")), "policy 'x'"),
    (lambda tmp: get_suite("torch-opinfo", "medium"), "unknown mode 'medium'"),
    (lambda tmp: run_suite(get_suite("torch-opinfo"), Selection(ops=("addd",))), "unknown op 'addd'"),
    (lambda tmp: read_run(tmp / "missing"), "no such folder"),
    (lambda tmp: Selection(ops=()), "Selection(ops=()) selects no case (None: every one of ops)"),
]


@pytest.mark.parametrize(("call", "message"), API_BAD_INPUTS)
def test_bad_api_inputs(call, message, tmp_path):
    with pytest.raises(UsageError, match=re.escape(message)):
        call(tmp_path)


def test_a_device_this_machine_lacks_is_refused_before_a_local_ray_starts(monkeypatch, tmp_path, capsys):
    from distcheck import gpus
    from tests.runner.test_gpus import FakeCuda

    monkeypatch.setattr(gpus, "cuda", FakeCuda(count=0))
    for variable in ("DISTCHECK_RAY_ADDRESS", "RAY_ADDRESS"):
        monkeypatch.delenv(variable, raising=False)
    out = tmp_path / "run"
    assert main(["run", "--device", "cuda", "--ops", "sinh", "--out", str(out)]) == 2
    why = "this machine has no CUDA device (a fake torch); use --device cpu"
    assert capsys.readouterr().err.splitlines() == [f"distcheck: error: --device cuda: {why}"]
    ray = sys.modules.get("ray")
    assert not out.exists() and (ray is None or not ray.is_initialized())


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


def test_list_op_names(fake, capsys):
    """``distcheck list --ops``: the suite's op names, one a line, of the selected cases."""
    from tests.runner.fake_suite import OPS

    assert main(["list", "--suite", "fake", "--ops"]) == 0
    assert capsys.readouterr().out.split() == list(OPS)
    declared = ["list", "--ops", "--suite", "tests.suites.declared_suites:suite"]
    assert main([*declared, "--checks", "gradgrad", "--dtypes", "float64"]) == 0
    assert capsys.readouterr().out.split() == ["sin", "skipped"]
    assert main([*declared, "-k", "wro"]) == 0 and capsys.readouterr().out.split() == ["wrong"]
    assert main([*declared, "-k", "nothing"]) == 2 and "no case matches" in capsys.readouterr().err


def test_run_passing_cases(fake, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    report = tmp_path / "run.json"
    assert main([*FAKE_RUN, "--json", str(report)]) == 0
    captured = capsys.readouterr()
    (folder,) = (tmp_path / "runs").iterdir()  # the default run folder
    assert folder.name.startswith("fake-fast-") and f"distcheck: run folder runs/{folder.name}" in captured.err
    assert json.loads((folder / "report.json").read_text())["cases"] == json.loads(report.read_text())["cases"]
    assert "distcheck: suite fake (fast mode) on serial, 1 worker(s)" in captured.err
    assert "progress: " in captured.err  # stderr is not a terminal here: plain lines
    assert captured.out.splitlines()[-2] == "OK" and "JSON report" in captured.out
    data = json.loads(report.read_text())
    assert [(c["id"], c["verdict"]) for c in data["cases"]] == [
        ("fake::sin::float64::sample0::grad", "pass"),
        ("fake::xfail::float64::grad", "xfail"),
    ]
    assert data["summary"]["command"][:2] == ["distcheck", "run"]


def test_run_with_failures_exits_1(fake, capsys, tmp_path):
    assert (
        main(["run", "--suite", "fake", "--ops", "sin,wrong", "--checks", "grad", "--serial", "--out", str(tmp_path)])
        == 1
    )
    out = capsys.readouterr().out
    assert "FAIL fake::wrong::float64::sample0::grad" in out and out.rstrip().endswith("FAILED")


def test_compare_two_runs_of_other_selections(fake, capsys, tmp_path):
    """A nightly that adds a failing op: the added case is a new failure, and the report says
    first that the selections differ (read from the runs' reports)."""
    run = ["run", "--suite", "fake", "--checks", "grad", "--serial", "--out"]
    assert main([*run, str(tmp_path / "old"), "--ops", "sin"]) == 0
    assert main([*run, str(tmp_path / "new"), "--ops", "sin,wrong"]) == 1
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "old"), str(tmp_path / "new")]) == 1
    out = capsys.readouterr().out
    assert "  - selection ops: sin in OLD, sin,wrong in NEW" in out
    assert "New failures: 1\n  fake::wrong::float64::sample0::grad  [fail]" in out


def test_python_dash_m():
    command = [sys.executable, "-m", "distcheck", "list", "--ops", "add", "--dtypes", "float64", "--max-cases", "2"]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "torch-opinfo::add::float64::sample0::grad",
        "torch-opinfo::add::float64::sample1::grad",
    ]


def test_resume_finishes_a_cut_run(folders, capsys):
    assert main(["run", "--resume", str(folders / "cut")]) == 0
    report = json.loads((folders / "cut" / "report.json").read_text())
    assert [c["id"] for c in report["cases"]] == ["fake::sin::float64::sample0::grad", "fake::xfail::float64::grad"]
    assert report["summary"]["complete"] and report["summary"]["command"][:3] == ["distcheck", "run", "--suite"]
    kinds = [json.loads(line)["$report_type"] for line in (folders / "cut" / RECORDS).read_text().splitlines()]
    assert kinds == ["RunStart", "CaseRecord", "RunResume", "CaseRecord", "RunFinish"]  # sin was not run again


@pytest.mark.parametrize(("strict", "status"), [([], 0), (["--strict-flaky"], 1)])
def test_flaky_cases_fail_a_run_only_when_strict(fake, capsys, tmp_path, monkeypatch, strict, status):
    monkeypatch.setattr(distcheck.cli.arguments, "get_suite", lambda name, mode, device="cpu": _flaky_suite(tmp_path))
    argv = ["run", "--suite", "fake", "--checks", "grad", "--serial", "--reruns", "1", "--out", str(tmp_path / "o")]
    assert main([*argv, *strict]) == status
    out = capsys.readouterr().out
    assert "FLAKY fake::flaky::float64::sample0::grad (attempts: fail, pass)" in out
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["summary"]["verdicts"]["flaky"] == 1 and report["cases"][0]["attempts"][1]["verdict"] == "pass"


def _flaky_suite(tmp_path):
    from tests.runner.fake_suite import FakeSuite

    return FakeSuite(ops=("flaky",), marker=str(tmp_path / "m"))


def test_list_into_a_closed_pipe():
    """``distcheck list | head -1``: no BrokenPipeError when the reader stops early."""
    command = f"{sys.executable} -m distcheck list --ops add,sub,mul --dtypes float64 | head -1"
    result = subprocess.run(
        command, shell=True, capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"}
    )
    assert result.stdout == "torch-opinfo::add::float64::sample0::grad\n"
    assert "Error" not in result.stderr, result.stderr


def test_descendants_are_the_processes_this_one_started():
    from distcheck.cli.signals import descendants

    child = subprocess.Popen(["sleep", "30"])
    try:
        assert child.pid in descendants(os.getpid()) and os.getpid() not in descendants(os.getpid())
    finally:
        child.kill()
        child.wait()


def test_help_lists_every_command(capsys):
    """One module per command in distcheck/cli/ (besides what several parse alike, a run's plan and
    its signals): each is listed by ``distcheck --help``."""
    helpers = {"__init__", "arguments", "run_plan", "signals"}
    modules = {p.stem for p in Path(distcheck.cli.__file__).parent.glob("*.py")} - helpers
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0
    listed = out.split("{", 1)[1].split("}", 1)[0].split(",")
    assert sorted(listed) == sorted(modules) == ["compare", "history", "list", "report", "repro", "run"]
    for command in listed:
        assert f"\n    {command} " in out  # with its help line
