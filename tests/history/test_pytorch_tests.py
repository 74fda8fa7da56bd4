"""The history per PyTorch test (``--junit-names pytorch``): a test's night is its samples'
outcome, as its JUnit testcase has it; a test whose samples only failed as flaky ones is flaky."""

from __future__ import annotations

import pytest

from distcheck.history.cases import History
from distcheck.history.night_run import from_loaded
from distcheck.history.pytorch_tests import by_pytorch_test
from distcheck.history.table import Scope, build
from distcheck.records.case_record import CaseRecord
from distcheck.reports.load import LoadedRun
from distcheck.suites.base import UsageError
from tests.history.runs import started
from tests.reports.runs import case


def _run(n: int, verdicts: dict[tuple[str, int], str], suite: str = "torch-opinfo"):
    records = [CaseRecord(case(op, sample=k, suite=suite), v, "", 0.5, 1) for (op, k), v in verdicts.items()]
    info = {"started": started(n), "mode": "fast", "complete": True}
    return from_loaded(LoadedRun(f"run{n}", info, records))


def test_a_test_per_op_dtype_and_check_its_samples_aggregated():
    nights = [
        {("sin", 0): "pass", ("sin", 1): "pass", ("cos", 0): "pass", ("cos", 1): "pass"},
        {("sin", 0): "pass", ("sin", 1): "fail", ("cos", 0): "flaky", ("cos", 1): "pass"},
        {("sin", 0): "xfail", ("sin", 1): "fail", ("cos", 0): "skipped", ("cos", 1): "skipped"},
    ]
    table = by_pytorch_test(build(None, Scope(), [_run(n, v) for n, v in enumerate(nights)]))
    assert table.ids == [
        "TestBwdGradientsCPU.test_fn_grad_cos_cpu_float64",
        "TestBwdGradientsCPU.test_fn_grad_sin_cpu_float64",
    ]
    h = History(table)
    assert h.case(0)["verdicts"] == ["pass", "flaky", "skipped"]
    assert h.case(1)["verdicts"] == ["pass", "fail", "fail"]
    assert h.case(1)["first_failing"] == h.nights[1] and h.case(1)["last_seconds"] == pytest.approx(1.0)


def test_only_torch_opinfo_has_pytorch_names():
    table = build(None, Scope(), [_run(0, {("sin", 0): "pass"}, suite="my-kernels")])
    with pytest.raises(UsageError, match="names the tests of torch-opinfo; the history has cases of my-kernels"):
        by_pytorch_test(table)


def test_an_empty_table_stays_empty():
    assert by_pytorch_test(build(None, Scope())).ids == []
