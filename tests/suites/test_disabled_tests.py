"""PyTorch's disabled tests: matched as PyTorch's runner matches them, their cases skipped."""

from __future__ import annotations

import json
import os
import re

import pytest

from distcheck.cli import main
from distcheck.suites.base import SKIPPED, CaseId, CaseInfo, GroupInfo, Selection, UsageError
from distcheck.suites.torch_opinfo import TorchOpInfoSuite
from distcheck.suites.torch_opinfo.disabled import DISABLED, DisabledTests, with_disabled_tests
from distcheck.suites.torch_opinfo.pytorch_names import pytorch_test

ISSUE = "https://github.com/pytorch/pytorch/issues/"
LINUX = {"linux": True, "win": False, "mac": False, "dynamo": False, "slow": False}


def _file(tmp_path, entries) -> str:
    path = tmp_path / "disabled.json"
    path.write_text(entries if isinstance(entries, str) else json.dumps(entries))
    return str(path)


def _disabled(tmp_path, entries, on=LINUX) -> DisabledTests:
    return DisabledTests.read(_file(tmp_path, entries), on)


def _issue(disabled: DisabledTests, check: str, op: str, dtype: str = "float64") -> str | None:
    entry = disabled.disabling(pytorch_test(check, op, dtype))
    return None if entry is None else entry.issue


def test_keys_match_as_check_if_enable_matches_them(tmp_path):
    disabled = _disabled(
        tmp_path,
        {
            "test_fn_grad_sinh_cpu_float64 (__main__.TestBwdGradientsCPU)": [ISSUE + "1", []],
            "test_fn_gradgrad_cos (__main__.TestBwdGradients)": [ISSUE + "2", []],  # every dtype, any device
            "test_forward_mode_AD_tan_cpu_complex128 (test_ops_fwd_gradients.TestFwdGradientsCPU)": [ISSUE + "3", []],
            "test_fn_grad_mm_cpu_float64 (__main__.TestFwdGradientsCPU)": [ISSUE + "4", []],  # another class
            "test_fn_grad_exp_cpu_float64": [ISSUE + "5", []],  # no class: PyTorch ignores it
        },
    )
    assert _issue(disabled, "grad", "sinh") == ISSUE + "1"
    assert _issue(disabled, "grad", "sinh", "complex128") is None
    assert _issue(disabled, "gradgrad", "cos") == _issue(disabled, "gradgrad", "cos", "complex128") == ISSUE + "2"
    assert _issue(disabled, "grad", "cos") is None
    assert _issue(disabled, "fwgrad", "tan", "complex128") == ISSUE + "3"
    assert _issue(disabled, "grad", "mm") is None
    assert _issue(disabled, "grad", "exp") is None
    assert len(disabled) == 4


def test_platforms_are_honoured_as_pytorch_does(tmp_path):
    key = "test_fn_grad_sinh_cpu_float64 (__main__.TestBwdGradientsCPU)"
    for platforms, applies in [
        ([], True),
        (["linux"], True),
        (["win", "linux"], True),
        (["win", "mac"], False),
        (["dynamo"], False),  # distcheck runs eagerly
        (["windows-ish"], True),  # unknown names dropped: none left means every platform
        (["windows-ish", "win"], False),
    ]:
        disabled = _disabled(tmp_path, {key: [ISSUE + "9", platforms]})
        assert (_issue(disabled, "grad", "sinh") is not None) == applies, platforms


def test_the_first_entry_that_applies_disables(tmp_path):
    disabled = _disabled(
        tmp_path,
        {
            "test_fn_grad_sinh (__main__.TestBwdGradients)": [ISSUE + "1", ["win"]],
            "test_fn_grad_sinh_cpu_float64 (__main__.TestBwdGradientsCPU)": [ISSUE + "2", ["linux"]],
            "test_fn_grad_sinh (__main__.TestBwdGradientsCPU)": [ISSUE + "3", []],
        },
    )
    assert _issue(disabled, "grad", "sinh") == ISSUE + "2"
    assert _issue(disabled, "grad", "sinh", "complex128") == ISSUE + "3"


def test_the_condensed_form_with_issue_numbers_is_read(tmp_path):
    disabled = _disabled(tmp_path, {"test_fn_grad_sinh (__main__.TestBwdGradientsCPU)": ["123", ISSUE + "123", []]})
    assert _issue(disabled, "grad", "sinh") == ISSUE + "123"


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ("{not json", "is not JSON"),
        (
            [["test_fn_grad_sinh (__main__.TestBwdGradientsCPU)", ISSUE, []]],
            "expected a JSON object of tests, got a list",
        ),
        ({"test_fn_grad_sinh (__main__.X)": ISSUE}, "the value of 'test_fn_grad_sinh (__main__.X)' is not [issue URL"),
        ({"test_fn_grad_sinh (__main__.X)": [ISSUE, "linux"]}, "is not [issue URL, [platforms]]"),
        ({"test_fn_grad_sinh (__main__.X)": [ISSUE, [1]]}, "is not [issue URL, [platforms]]"),
    ],
)
def test_a_malformed_file_is_a_one_line_error(tmp_path, content, error):
    with pytest.raises(UsageError, match=re.escape(error)) as raised:
        DisabledTests.read(_file(tmp_path, content))
    assert "\n" not in str(raised.value) and str(raised.value).startswith("--disabled-tests: ")


def test_the_cases_of_a_disabled_test_are_skipped_with_its_issue(tmp_path):
    path = _file(
        tmp_path,
        {
            "test_fn_grad_sinh (__main__.TestBwdGradientsCPU)": [ISSUE + "7", []],
            "test_fn_grad_cov_cpu_float64 (__main__.TestBwdGradientsCPU)": [ISSUE + "8", []],
        },
    )
    suite = with_disabled_tests(TorchOpInfoSuite(), path)
    items = list(suite.groups(Selection(checks=("grad", "gradgrad"), ops=("sinh", "cov"), dtypes=("float64",))))
    groups = [i for i in items if isinstance(i, GroupInfo)]
    decided = {str(i.id): i for i in items if isinstance(i, CaseInfo)}
    # cov's gradgrad is expected to fail: run (xfail / xpass), so in a group
    assert [(g.op, g.checks) for g in groups] == [("sinh", ("gradgrad",)), ("cov", ("gradgrad",))]
    sinh = decided["torch-opinfo::sinh::float64::grad"]
    assert sinh.status == SKIPPED and sinh.reason.startswith(DISABLED + ISSUE + "7 for all platforms")
    assert decided["torch-opinfo::cov::float64::grad"].status == SKIPPED  # disabled beats expected failure
    assert suite.build(CaseId("torch-opinfo", "sinh", "float64", "gradgrad", 0)).calls
    with pytest.raises(UsageError, match="not of suite 'fake'"):
        with_disabled_tests(type("S", (), {"name": "fake"})(), path)


def test_distcheck_run_counts_the_disabled_apart(tmp_path, capsys):
    path = _file(tmp_path, {"test_fn_grad_sinh (__main__.TestBwdGradientsCPU)": [ISSUE + "7", ["linux"]]})
    argv = ["run", "--ops", "sinh", "--checks", "grad", "--serial", "--out", str(tmp_path / "run")]
    assert main([*argv, "--disabled-tests", path, "--json", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "2 disabled: skipped as PyTorch's disabled tests" in out
    assert json.loads((tmp_path / "r.json").read_text())["summary"]["disabled"] == 2


def test_a_malformed_file_stops_the_run_before_it_starts(tmp_path, capsys):
    path = _file(tmp_path, {"test_fn_grad_sinh (__main__.X)": "no"})
    out = tmp_path / "run"
    assert main(["run", "--ops", "sinh", "--serial", "--out", str(out), "--disabled-tests", path]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("distcheck: error: --disabled-tests: ")
    assert not os.path.exists(out)


def test_a_resumed_run_skips_the_disabled_tests_its_run_started_with(tmp_path, capsys):
    path = _file(tmp_path, {"test_fn_grad_sinh_cpu_float64 (__main__.TestBwdGradientsCPU)": [ISSUE + "7", []]})
    run = tmp_path / "run"
    argv = ["run", "--ops", "sinh", "--checks", "grad", "--serial", "--out", str(run)]
    assert main([*argv, "--disabled-tests", path]) == 0
    # cut the run before its disabled case was recorded, and take the file away: the folder has it
    lines = (run / "records.jsonl").read_text().splitlines()
    kept = [line for line in lines if '"RunFinish"' not in line and "::float64::" not in line]
    assert len(kept) > 1 and '"RunStart"' in kept[0]
    (run / "records.jsonl").write_text("\n".join(kept) + "\n")
    (run / "report.json").unlink()
    os.rename(path, tmp_path / "moved.json")
    capsys.readouterr()
    assert main(["run", "--resume", str(run)]) == 0
    report = json.loads((run / "report.json").read_text())
    disabled = [c for c in report["cases"] if "::float64::" in c["id"]]
    assert [(c["id"], c["verdict"]) for c in disabled] == [("torch-opinfo::sinh::float64::grad", SKIPPED)]
    assert disabled[0]["message"].startswith(DISABLED + ISSUE + "7") and path in disabled[0]["message"]
    assert report["summary"]["disabled"] == 1


def test_a_resume_refuses_other_disabled_tests(tmp_path, capsys):
    same = _file(tmp_path, {"test_fn_grad_sinh_cpu_float64 (__main__.TestBwdGradientsCPU)": [ISSUE + "7", []]})
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"test_fn_grad_sinh (__main__.TestBwdGradientsCPU)": [ISSUE + "8", []]}))
    runs = {"with": ["--disabled-tests", same], "without": []}
    for name, given in runs.items():
        argv = ["run", "--ops", "sinh", "--checks", "grad", "--serial", "--out", str(tmp_path / name), *given]
        assert main(argv) == 0
        lines = (tmp_path / name / "records.jsonl").read_text().splitlines()
        (tmp_path / name / "records.jsonl").write_text(lines[0] + "\n")  # cut before its first record
    capsys.readouterr()
    for name, given, ran in [("with", other, f"with the disabled tests of {same}"), ("without", same, "without")]:
        assert main(["run", "--resume", str(tmp_path / name), "--disabled-tests", str(given)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"--disabled-tests: {given} is not the file the run was started with" in err[0]
        assert f"(it ran {ran}" in err[0]
    assert main(["run", "--resume", str(tmp_path / "with"), "--disabled-tests", same]) == 0
