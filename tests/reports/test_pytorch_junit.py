"""JUnit XML under PyTorch's test names: a testcase per PyTorch test, its samples aggregated."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

import pytest

from distcheck.cli import main
from distcheck.records.case_record import CaseRecord
from distcheck.reports import pytorch_junit
from tests.reports.runs import MISMATCH, case, run_folder
from tests.reports.test_junit import SCHEMA


@pytest.mark.parametrize(
    ("verdicts", "outcome"),
    [
        (["pass", "pass"], "pass"),
        (["pass", "skipped"], "pass"),
        (["skipped", "skipped"], "skipped"),
        (["xfail", "pass", "skipped"], "xfail"),
        (["xfail", "fail"], "fail"),
        (["pass", "error"], "fail"),
        (["timeout"], "fail"),
        (["xpass", "xpass"], "fail"),  # an unexpected success fails PyTorch's test
        (["xpass", "xfail"], "xfail"),  # PyTorch's test stops at its failing sample: xfailed
        (["pass", "flaky"], "fail"),
    ],
)
def test_a_tests_outcome_is_the_aggregate_of_its_samples(verdicts, outcome):
    assert pytorch_junit.aggregate(verdicts) == outcome


def _records() -> list[CaseRecord]:
    return [
        CaseRecord(case("sinh", sample=0), "pass", "", 0.25, 1),
        CaseRecord(case("sinh", sample=1), "fail", MISMATCH, 0.5, 1),
        CaseRecord(case("sinh", sample=2), "error", "gradcheck raised RuntimeError: boom", 0.25, 1),
        CaseRecord(case("sinh", "gradgrad", 0), "pass", "", 1.0, 1),
        CaseRecord(case("sinh", "gradgrad", 1), "skipped", "sample skipped", 0.0, 0),
        CaseRecord(case("cov", sample=None), "xfail", "OpInfo marks TestBwdGradients.test_fn_grad", 0.0, 0),
        CaseRecord(case("var_mean.unbiased", "fwgrad", None, "complex128"), "skipped", "Skipped! no complex", 0, 0),
        CaseRecord(case("cat", "gradgrad", 5), "xpass", "unexpected success", 0.5, 1),
        CaseRecord(case("cat", "gradgrad", 6), "xpass", "unexpected success", 0.5, 1),
    ]


def _xml(records) -> ET.Element:
    out = io.StringIO()
    pytorch_junit.write(out, records, {"suite": "torch-opinfo"}, lambda r: f"distcheck repro {r.id}")
    SCHEMA.validate(out.getvalue())
    return ET.fromstring(out.getvalue())


def test_one_testcase_per_pytorch_test_in_a_testsuite_per_file():
    root = _xml(_records())
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert list(suites) == ["test_ops_fwd_gradients", "test_ops_gradients"]
    backward = suites["test_ops_gradients"]
    assert backward.get("file") == "test_ops_gradients.py"
    assert (backward.get("tests"), backward.get("failures"), backward.get("skipped")) == ("4", "2", "1")
    cases = {(c.get("classname"), c.get("name")): c for c in backward.iter("testcase")}
    assert sorted(name for _, name in cases) == [
        "test_fn_grad_cov_cpu_float64",
        "test_fn_grad_sinh_cpu_float64",
        "test_fn_gradgrad_cat_cpu_float64",
        "test_fn_gradgrad_sinh_cpu_float64",
    ]
    assert {classname for classname, _ in cases} == {"TestBwdGradientsCPU"}
    assert list(cases[("TestBwdGradientsCPU", "test_fn_gradgrad_sinh_cpu_float64")]) == []
    assert cases[("TestBwdGradientsCPU", "test_fn_grad_sinh_cpu_float64")].get("time") == "1.000"
    xfail = cases[("TestBwdGradientsCPU", "test_fn_grad_cov_cpu_float64")].find("skipped")
    assert xfail.get("type") == "pytest.xfail"
    (forward,) = suites["test_ops_fwd_gradients"].iter("testcase")
    assert (forward.get("classname"), forward.get("name")) == (
        "TestFwdGradientsCPU",
        "test_forward_mode_AD_var_mean_unbiased_cpu_complex128",
    )
    assert forward.find("skipped").get("message") == "Skipped! no complex"


def test_a_failing_test_lists_each_bad_sample_with_its_reproducer():
    root = _xml(_records())
    tests = {c.get("name"): c for c in root.iter("testcase")}
    failure = tests["test_fn_grad_sinh_cpu_float64"].find("failure")
    assert failure.get("type") == "GradcheckError"
    assert failure.get("message") == "sample1: Jacobian mismatch for output 0 with respect to input 0,"
    text = failure.text
    assert text.startswith("2 of 3 case(s) of TestBwdGradientsCPU.test_fn_grad_sinh_cpu_float64 failed:")
    assert "torch-opinfo::sinh::float64::sample1::grad: fail\n    Jacobian mismatch" in text
    assert "reproduce: distcheck repro torch-opinfo::sinh::float64::sample1::grad" in text
    assert "torch-opinfo::sinh::float64::sample2::grad: error\n    gradcheck raised RuntimeError: boom" in text
    assert "sample0" not in text
    xpass = tests["test_fn_gradgrad_cat_cpu_float64"].find("failure")
    assert xpass.get("type") == "xpass" and "2 of 2 case(s)" in xpass.text


def test_distcheck_report_writes_pytorch_names(tmp_path, capsys):
    folder = run_folder(tmp_path / "run")
    junit = tmp_path / "j.xml"
    assert main(["report", folder, "--junit", str(junit), "--junit-names", "pytorch"]) == 0
    SCHEMA.validate(str(junit))
    names = {c.get("name") for c in ET.parse(junit).iter("testcase")}
    assert "test_fn_grad_sin_cpu_float64" in names and "test_fn_gradgrad_cos_cpu_float64" in names
    assert main(["report", folder, "--html", str(tmp_path / "r.html"), "--junit-names", "pytorch"]) == 2
    assert "--junit-names pytorch needs --junit FILE" in capsys.readouterr().err


def test_pytorch_names_are_refused_for_other_suites(tmp_path, capsys):
    argv = ["run", "--suite", "tensorplay-opinfo", "--serial", "--junit", str(tmp_path / "j.xml")]
    assert main([*argv, "--junit-names", "pytorch", "--out", str(tmp_path / "run")]) == 2
    assert "names the tests of torch-opinfo, not of suite 'tensorplay-opinfo'" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
