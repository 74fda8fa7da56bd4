"""Every runner feature on suites from outside the package: a declared suite loaded by
``MODULE:NAME`` (rebuilt in Ray workers from its spec) and the example package's suite,
installed through its entry point."""

from __future__ import annotations

import json
import time

import pytest

from distcheck import cli
from distcheck.runner import RunOptions, run_suite
from distcheck.suites import Selection, get_suite
from tests.executors.conftest import ray_cluster  # noqa: F401 (the session's Ray)
from tests.suites import declared_suites

SPEC = "tests.suites.declared_suites:suite"
EXPECTED = {
    "declared::sin::float64::sample0::grad": "pass",
    "declared::sin::float64::sample1::grad": "pass",
    "declared::wrong::float64::sample0::grad": "fail",
    "declared::wrong::float64::sample1::grad": "fail",
    "declared::skipped::float64::grad": "skipped",
    "declared::expected::float64::grad": "xfail",
}


def _verdicts(result):
    return {r.id: r.verdict for r in result.records}


def test_serial_verdicts_and_a_timeout():
    selection = Selection(checks=("grad",), dtypes=("float64",))
    # first, without a timeout: the first check imports torch's vmap machinery (sympy...), which
    # can take over a second on a loaded machine, and an import interrupted by the timer's
    # exception leaves a half-initialized module behind
    run_suite(get_suite(SPEC), Selection(checks=("grad",), ops=("sin",)), RunOptions(serial=True, timeout=None))
    start = time.perf_counter()
    result = run_suite(get_suite(SPEC), selection, RunOptions(serial=True, timeout=2))
    assert time.perf_counter() - start < declared_suites.SLEEP  # it did not wait for the sleep to end
    verdicts = _verdicts(result)
    assert verdicts.pop("declared::sleepy::float64::sample0::grad") == "pass"
    timed_out = next(r for r in result.records if r.id == "declared::sleepy::float64::sample1::grad")
    assert timed_out.verdict == "timeout" and "2 s" in timed_out.message
    verdicts.pop(timed_out.id)
    assert verdicts == EXPECTED
    wrong = next(r for r in result.records if r.case.op == "wrong")
    assert "Jacobian mismatch for output 0 with respect to input 0" in wrong.message


def test_budget_skips_a_slow_mode_case_of_an_installed_suite():
    selection = Selection(checks=("grad",), ops=("matmul_add",), dtypes=("float64",))
    result = run_suite(get_suite("example-functions", "slow"), selection, RunOptions(serial=True, max_jacobian_mb=1e-3))
    assert [r.verdict for r in result.records] == ["skipped", "pass"]  # the 2×4 output of sample 0 is too big
    assert "over the memory budget" in result.records[0].message and result.records[0].estimate


def test_json_report_of_an_installed_suite(tmp_path, capsys):
    report = tmp_path / "report.json"
    argv = ["run", "--suite", "example-functions", "--serial", "--ops", "cube,round_ste", "--json", str(report)]
    argv += ["--out", str(tmp_path / "run")]
    assert cli.main(argv) == 0
    data = json.loads(report.read_text())
    assert data["summary"]["suite"] == "example-functions"
    assert data["summary"]["command"] == ["distcheck", *argv]
    assert data["summary"]["verdicts"] == {"pass": 12, "fail": 0, "error": 0, "skipped": 0, "xfail": 2, "timeout": 0}
    xfail = next(c for c in data["cases"] if c["op"] == "round_ste")
    assert xfail["verdict"] == "xfail" and "straight-through" in xfail["message"]
    assert "example-functions (fast mode) on serial" in capsys.readouterr().out


@pytest.mark.ray
def test_on_ray_with_a_timeout_as_serial(ray_cluster):  # noqa: F811
    selection = Selection(checks=("grad",), dtypes=("float64",))
    on_ray = run_suite(get_suite(SPEC), selection, RunOptions(timeout=3, batch_size=4))
    assert on_ray.executor == "ray"
    verdicts = _verdicts(on_ray)
    assert verdicts.pop("declared::sleepy::float64::sample0::grad") == "pass"
    assert verdicts.pop("declared::sleepy::float64::sample1::grad") == "timeout"
    assert verdicts == EXPECTED


@pytest.mark.ray
def test_installed_suite_on_ray_matches_serial(ray_cluster):  # noqa: F811
    suite = get_suite("example-functions")
    selection = Selection(checks=("grad", "gradgrad"))
    on_ray = run_suite(suite, selection, RunOptions(timeout=120))
    serial = run_suite(suite, selection, RunOptions(serial=True, timeout=120))
    assert _verdicts(on_ray) == _verdicts(serial)
    assert on_ray.counts() == {"pass": 30, "fail": 0, "error": 0, "skipped": 0, "xfail": 2, "timeout": 0}


@pytest.mark.ray
def test_split_cases_of_a_declared_suite(ray_cluster):  # noqa: F811
    suite = get_suite("tests.suites.declared_suites:large", "slow")
    result = run_suite(suite, Selection(), RunOptions(timeout=120, split_seconds=0.01))
    big, wrong = result.records
    assert big.verdict == "pass" and big.tasks > 1 and big.estimate["columns"] == 1500, big
    assert wrong.verdict == "fail" and wrong.tasks > 1 and "Jacobian mismatch" in wrong.message
