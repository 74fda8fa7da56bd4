"""distcheck and torch.autograd side by side: equal verdicts on every parity case."""

from __future__ import annotations

import pytest

from distcheck import BatchCounts, Batching
from tests.parity.cases import ALL, CORRECT, GRAD_MODES, GRADGRAD, GRADGRAD_MODES, MODE_CASES, SPARSE, SPARSE_MODES
from tests.parity.runner import run


@pytest.mark.parametrize("case", [c for c in ALL if c not in MODE_CASES], ids=str)
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
    assert len(MODE_RUNS) >= 400


MODE_RUNS = (
    [
        pytest.param(case, mode, options, id=f"{case}-{mode}")
        for case in ALL
        for mode, options in (GRAD_MODES if case.kind == "grad" else GRADGRAD_MODES).items()
        if not set(options) & set(case.options)
    ]
    + [
        pytest.param(case, mode, options, id=f"{case}-{mode}")
        for case in SPARSE
        for mode, options in SPARSE_MODES.items()
    ]
    + [pytest.param(case, "default", {}, id=f"{case}-default") for case in MODE_CASES]
)


# torch 2.13 pairs output k's analytical Jacobian with another output's numerical one when a float
# output that does not require grad comes first (in fast mode, and in slow forward mode): it then
# fails a correct function. distcheck pairs them by output (README, "Differences from torch").
# Fast forward mode compares every float output (torch's semantics there), so it fails in both.
KNOWN_DIVERGENCES = {
    ("non_differentiable_float_output_first", mode): "pass"
    for mode in ("fast", "forward", "forward_only", "batched_forward", "batched_fast")
}


@pytest.mark.parametrize(("case", "mode", "options"), MODE_RUNS)
def test_same_verdict_as_torch_in_every_mode(case, mode, options):
    reference = run(case, "torch", **options)
    ours = run(case, "distcheck", **options)
    if (case.name, mode) in KNOWN_DIVERGENCES:
        assert reference.verdict == "GradcheckError", "torch's output pairing changed: drop the divergence"
        assert ours.verdict == KNOWN_DIVERGENCES[case.name, mode]
        return
    if (case.name, mode) == ("non_differentiable_float_output_first", "forward_fast"):
        assert (reference.verdict, ours.verdict) == ("GradcheckError", "GradcheckError")
        return
    assert ours.comparable() == reference.comparable(), f"\ntorch:     {reference}\ndistcheck: {ours}"


# -- batched Jacobian blocks: torch's verdicts by construction --------------------------------

FORCE = Batching(measure=False, min_seconds=0)  # batch whatever the engine can, untimed


@pytest.mark.parametrize("case", [c for c in ALL if c not in MODE_CASES], ids=str)
def test_batched_verdict_is_torchs(case):
    """Every parity case with its Jacobians batched wherever the engine can batch them: torch's
    verdict and kind of message, and the element-by-element path's message, character for
    character (the batched comparisons decide only clear passes)."""
    reference = run(case, "torch")
    exact = run(case, "distcheck", vectorize=False)
    counts = BatchCounts()
    batched = run(case, "distcheck", vectorize=FORCE, batch_counts=counts)
    assert batched.comparable() == reference.comparable(), f"\ntorch:     {reference}\nbatched: {batched}"
    if case.name not in NONDETERMINISTIC:
        assert batched.message == exact.message


NONDETERMINISTIC = {"nondet_backward", "nondet_backward_with_tol"}  # their messages hold the noise drawn


def test_batched_parity_cases_are_batched():
    """The parity run above does batch: most correct cases are decided on batched blocks."""
    decided = 0
    for case in CORRECT + GRADGRAD:
        counts = BatchCounts()
        run(case, "distcheck", vectorize=FORCE, batch_counts=counts)
        decided += counts.batched > 0 and counts.exact == 0
    assert decided >= (len(CORRECT) + len(GRADGRAD)) // 2


@pytest.mark.slow
@pytest.mark.parametrize(("case", "mode", "options"), MODE_RUNS)
def test_batched_verdict_is_torchs_in_every_mode(case, mode, options):
    reference = run(case, "torch", **options)
    batched = run(case, "distcheck", vectorize=FORCE, **options)
    if (case.name, mode) in KNOWN_DIVERGENCES:
        assert batched.verdict == KNOWN_DIVERGENCES[case.name, mode]
        return
    if (case.name, mode) == ("non_differentiable_float_output_first", "forward_fast"):
        assert batched.verdict == "GradcheckError"
        return
    assert batched.comparable() == reference.comparable(), f"\ntorch:     {reference}\nbatched: {batched}"
