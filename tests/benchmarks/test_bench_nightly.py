"""bench_nightly's comparison of pytest's outcomes with distcheck's, per PyTorch test."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.bench_nightly import compare, distcheck_outcomes, keyword, main, pytest_outcomes, selected, timed_part
from distcheck.records.case_record import CaseRecord
from tests.reports.runs import case

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="6">
<testcase classname="test_ops_gradients.TestBwdGradientsCPU" name="test_fn_grad_sinh_cpu_float64" time="1"/>
<testcase classname="test_ops_gradients.TestBwdGradientsCPU" name="test_fn_grad_cos_cpu_float64" time="1">
  <failure message="boom">boom</failure></testcase>
<testcase classname="test_ops_gradients.TestBwdGradientsCPU" name="test_fn_grad_cov_cpu_float64" time="0">
  <skipped type="pytest.xfail" message="expected"/></testcase>
<testcase classname="test_ops_gradients.TestBwdGradientsCPU" name="test_fn_grad_eq_cpu_float64" time="0">
  <skipped type="pytest.skip" message="no autograd"/></testcase>
<testcase classname="test_ops_gradients.TestBwdGradientsCPU" name="test_fn_grad_cond_simple_cpu_float64" time="1"/>
<testcase classname="test_ops_fwd_gradients.TestFwdGradientsCPU" name="test_forward_mode_AD_tan_cpu_float64" time="1">
  <error message="crash">crash</error></testcase>
</testsuite></testsuites>
"""


def _records() -> list[CaseRecord]:
    return [
        CaseRecord(case("sinh", sample=0), "pass"),
        CaseRecord(case("sinh", sample=1), "pass"),
        CaseRecord(case("cos", sample=0), "pass"),  # pytest fails it: a difference
        CaseRecord(case("cov", sample=None), "xfail"),
        CaseRecord(case("tan", "fwgrad", 0), "fail"),
        CaseRecord(case("tan", "gradgrad", 0), "pass"),  # not in the XML
    ]


def _junit(tmp_path) -> str:
    path = tmp_path / "plain.xml"
    path.write_text(JUNIT)
    return str(path)


def test_outcomes_per_test_from_pytests_xml_and_distchecks_records(tmp_path):
    theirs = pytest_outcomes(_junit(tmp_path))
    assert theirs[("TestBwdGradientsCPU", "test_fn_grad_cos_cpu_float64")] == "fail"
    assert theirs[("TestBwdGradientsCPU", "test_fn_grad_cov_cpu_float64")] == "xfail"
    assert theirs[("TestBwdGradientsCPU", "test_fn_grad_eq_cpu_float64")] == "skipped"
    assert theirs[("TestFwdGradientsCPU", "test_forward_mode_AD_tan_cpu_float64")] == "fail"
    ours = distcheck_outcomes(_records())
    assert ours[("TestBwdGradientsCPU", "test_fn_grad_sinh_cpu_float64")] == "pass"
    assert len(ours) == 5


def test_the_comparison_finds_differences_missing_and_extra_tests(tmp_path):
    c = compare(pytest_outcomes(_junit(tmp_path)), distcheck_outcomes(_records()))
    assert c.compared == 4
    assert c.differences == [("TestBwdGradientsCPU.test_fn_grad_cos_cpu_float64", "fail", "pass")]
    assert c.missing == [("TestBwdGradientsCPU.test_fn_grad_cond_simple_cpu_float64", "pass")]
    assert c.skipped_only_by_pytest == 1  # eq: no autograd, distcheck does not enumerate it
    assert c.only_in_distcheck == ["TestBwdGradientsCPU.test_fn_gradgrad_tan_cpu_float64"]
    assert not c.ok
    only_sinh = compare(pytest_outcomes(_junit(tmp_path)), distcheck_outcomes(_records()), selected(["grad"], ["sinh"]))
    assert (only_sinh.compared, only_sinh.ok) == (1, True)
    forward = compare(pytest_outcomes(_junit(tmp_path)), distcheck_outcomes(_records()), selected(["fwgrad"], None))
    assert (forward.compared, forward.ok, forward.only_in_distcheck) == (1, True, [])


def test_pytests_keyword_selects_exactly_the_kinds_and_ops():
    assert keyword(["grad", "gradgrad", "fwgrad", "fwgrad_bwgrad", "inplace_grad", "inplace_gradgrad",
                    "inplace_fwgrad", "fail_gradgrad"], None) is None  # fmt: skip
    assert keyword(["fwgrad", "grad"], None) == "test_forward_mode_AD_ or test_fn_grad_"
    assert keyword(["grad"], ["sinh"]) == "test_fn_grad_sinh_cpu_complex128 or test_fn_grad_sinh_cpu_float64"


def test_with_both_runs_given_it_only_compares(tmp_path, capsys):
    report = tmp_path / "report.json"
    cases = [r.to_json() for r in _records()]
    report.write_text(json.dumps({"summary": {"suite": "torch-opinfo", "mode": "fast"}, "cases": cases}))
    argv = ["--pytest-junit", _junit(tmp_path), "--distcheck-json", str(report), "--checks", "grad"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "DIFFERENT TestBwdGradientsCPU.test_fn_grad_cos_cpu_float64: pytest fail, distcheck pass" in out
    assert "MISSING TestBwdGradientsCPU.test_fn_grad_cond_simple_cpu_float64: pytest pass" in out
    assert main([*argv, "--ops", "sinh,cov", "--json", str(tmp_path / "f.json")]) == 0
    assert json.loads((tmp_path / "f.json").read_text())["comparison"]["compared"] == 2


def test_a_stopped_benchmark_stops_the_part_it_runs(tmp_path):
    """SIGTERM to the benchmark while a part runs: the part's processes end too, its children
    included (they were left running beside the next measurement), and the benchmark exits with
    a message."""
    pid_file = tmp_path / "child.pid"
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); import signal\n"
        "from benchmarks import bench_nightly as b\n"
        "signal.signal(signal.SIGTERM, b.stop_on_signal)\n"
        "b.timed_part(['sh', '-c', 'sleep 60 & echo $$ $! > ' + sys.argv[2] + '; wait'], {})\n"
    )
    root = str(Path(__file__).resolve().parents[2])
    bench = subprocess.Popen([sys.executable, "-c", script, root, str(pid_file)], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and len(pid_file.read_text().split()) == 2) and time.monotonic() < deadline:
        time.sleep(0.05)
    part, its_child = (int(pid) for pid in pid_file.read_text().split())
    bench.send_signal(signal.SIGTERM)
    _, err = bench.communicate(timeout=30)
    assert bench.returncode != 0 and "stopped by SIGTERM" in err
    deadline = time.monotonic() + 10  # the part's own child (pytest's workers) is stopped too
    while any(_running(pid) for pid in (part, its_child)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(part) and not _running(its_child)


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize(
    "script, interrupted",
    [("kill -TERM $$", ()), ("exit 143", ()), ("exit 2", (2,))],
    ids=["killed", "distcheck-stopped", "pytest-interrupted"],
)
def test_a_part_that_was_stopped_is_no_figure(script, interrupted):
    with pytest.raises(SystemExit, match="was stopped"):
        timed_part(["sh", "-c", script], {}, interrupted=interrupted)


def test_a_part_that_ran_to_its_end_is_timed_whatever_its_outcome():
    assert timed_part(["sh", "-c", "exit 1"], {}, interrupted=(2,)) >= 0
