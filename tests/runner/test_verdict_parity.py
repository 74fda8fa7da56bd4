"""distcheck's verdicts equal torch.autograd's on the same built OpInfo cases: 20 ops, both
dtypes, grad and gradgrad, fast and slow mode (the first sample of each)."""

from __future__ import annotations

import pytest

from distcheck.case.judge import distcheck_checker, judge
from distcheck.executors.serial import SerialExecutor
from distcheck.suites import CaseId, Selection, get_suite
from distcheck.suites.checkers import torch_checker

OPS = (
    "add",
    "mul",
    "sin",
    "exp",
    "sum",
    "mean",
    "matmul",
    "mm",
    "nn.functional.conv2d",
    "nn.functional.relu",
    "softmax",
    "linalg.det",
    "linalg.inv",
    "linalg.svd",
    "index_select",
    "gather",
    "cat",
    "nn.functional.layer_norm",
    "nn.functional.max_pool2d",
    "nn.functional.cross_entropy",
)


@pytest.mark.parametrize("mode", ["fast", "slow"])
def test_same_verdicts_as_torch(mode):
    suite = get_suite("torch-opinfo", mode)
    selection = Selection(checks=("grad", "gradgrad"), ops=OPS, substring="::sample0::")
    ours, reference = distcheck_checker(SerialExecutor()), torch_checker()
    compared, differences = 0, []
    for info in suite.cases(selection):
        built = suite.build(info.id)
        mine, theirs = judge(built, ours), judge(built, reference)
        compared += 1
        if mine[0] != theirs[0]:
            differences.append((info.key, mine, theirs))
    assert compared >= 60
    assert differences == []


@pytest.mark.parametrize(
    "case",
    [
        "torch-opinfo::abs::float64::sample0::gradgrad",  # double backward returns a ZeroTensor
        "torch-opinfo::sgn::float64::sample0::grad",
        "torch-opinfo::cdist::float64::sample0::fwgrad",  # no forward AD: NotImplementedError expected
        "torch-opinfo::cumprod::float64::sample0::grad",  # gradcheck_fast_mode=False
    ],
)
def test_same_verdict_on_known_edge_cases(case):
    suite = get_suite("torch-opinfo")
    built = suite.build(CaseId.parse(case))
    assert judge(built, distcheck_checker(SerialExecutor())) == judge(built, torch_checker()) == ("pass", "")
