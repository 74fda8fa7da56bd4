"""distcheck and torch.autograd side by side: equal verdicts on every parity case."""

from __future__ import annotations

import pytest

from tests.parity.cases import ALL
from tests.parity.runner import run


@pytest.mark.parametrize("case", ALL, ids=str)
def test_same_verdict_as_torch(case):
    reference = run(case, "torch")
    ours = run(case, "distcheck")
    assert reference.verdict == case.expect, f"torch's verdict changed: {reference}"
    assert ours.comparable() == reference.comparable(), f"\ntorch:     {reference}\ndistcheck: {ours}"


@pytest.mark.parametrize("case", [c for c in ALL if c.expect == "GradcheckError"], ids=str)
def test_raise_exception_false_returns_false(case):
    assert run(case, "torch", raise_exception=False).verdict == "returned False"
    assert run(case, "distcheck", raise_exception=False).verdict == "returned False"


def test_case_count():
    assert len(ALL) >= 40
