"""Estimates and budgets: sizes from one evaluation, never a Jacobian."""

from __future__ import annotations

import pytest
import torch

import distcheck.case.budget as budget_module
from distcheck.case.budget import SKIP, SPLIT, Budget, Estimate, estimate
from distcheck.suites import BuiltCase, CaseId, CheckCall, get_suite

CASE = CaseId("test", "matmul", "float64", "grad", 0)


def _case(calls, dtype=torch.float64) -> BuiltCase:
    a = torch.ones(3, 4, dtype=dtype, requires_grad=True)
    b = torch.ones(4, 2, dtype=dtype, requires_grad=True)
    return BuiltCase(CASE, torch.matmul, (a, b), tuple(calls), "fp")


def test_slow_grad_counts_inputs_and_outputs():
    e = estimate(_case([CheckCall("gradcheck", {"fast_mode": False})]))
    assert (e.columns, e.rows, e.itemsize) == (12 + 8, 6, 8)
    assert e.bytes == 2 * 20 * 6 * 8 and e.seconds > 0


def test_gradgrad_checks_the_derived_function():
    e = estimate(_case([CheckCall("gradgradcheck", {"fast_mode": False})] * 2, dtype=torch.complex128))
    assert (e.columns, e.rows, e.itemsize) == (20 + 6, 20, 16)


def test_fast_mode_holds_no_jacobian():
    e = estimate(_case([CheckCall("gradcheck", {"fast_mode": True})]))
    assert e.bytes == 0


def test_decisions(monkeypatch):
    monkeypatch.setattr(budget_module, "cluster_memory", lambda: None)  # outside Ray
    small = Estimate(10, 10, 8, 0.01)
    assert Budget(1e6).decide(small)[0] == "run"
    assert Budget(100).decide(small)[0] == SKIP
    assert Budget(1e6, split_seconds=0.001).decide(small)[0] == SPLIT
    assert Budget(1e6, split_seconds=1.0).decide(small)[0] == "run"
    assert Budget(1e6, split_seconds=0.001, split_max_bytes=100).decide(small)[0] == "run"  # large Jacobians
    assert Budget(1e6, split_seconds=0.001, split_max_bytes=100, cluster_bytes=1e6).decide(small)[0] == SPLIT


def test_grid_sampler_3d_is_over_any_budget():
    """Its third sample: a 5.2 M × 554 k Jacobian (23 TB), which kills torch's own serial
    gradcheck; the estimate evaluates the function once and allocates no Jacobian."""
    suite = get_suite("torch-opinfo", "slow")
    built = suite.build(CaseId.parse("torch-opinfo::grid_sampler_3d::float64::sample2::grad"))
    e = estimate(built)
    assert (e.columns, e.rows) == (5_179_680, 554_400)
    decision, reason = Budget(8 * 2**30).decide(e)
    assert decision == SKIP
    assert "5,179,680 × 554,400 (23 TB dense" in reason and "--max-jacobian-mb 8,192" in reason


@pytest.mark.parametrize("size", [1, 100])
def test_estimate_does_not_change_the_inputs(size):
    case = _case([CheckCall("gradcheck", {"fast_mode": False})])
    before = [x.detach().clone() for x in case.inputs]
    estimate(case)
    assert all(torch.equal(x, y) for x, y in zip(case.inputs, before)) and all(x.grad is None for x in case.inputs)


def test_the_estimate_leaves_no_call_for_the_check_to_reuse():
    """Timing a backward pass takes a reference call; the check after it (its RNGs reseeded)
    must call the function afresh, as torch's gradcheck does."""
    from distcheck.engines import get_engine
    from distcheck.engines.reference import reference_call

    calls = []

    def func(x):
        calls.append(1)
        return x.sin()

    x = torch.linspace(0.1, 0.9, 1200, dtype=torch.float64).requires_grad_()  # large enough to be timed
    case = BuiltCase(CASE, func, (x,), (CheckCall("gradcheck", {"fast_mode": False}),), "fp")
    estimate(case)
    before = len(calls)
    reference_call(get_engine("torch"), func, (x,))
    assert len(calls) == before + 1


def test_on_a_cluster_a_long_case_splits_whatever_its_size_up_to_the_cluster_memory():
    e = Estimate(columns=10_000, rows=10_000, itemsize=8, seconds=100.0)  # 1.6 GB
    assert Budget(2**20, split_seconds=1.0, split_max_bytes=2**20, cluster_bytes=1e10).decide(e)[0] == SPLIT
    decision, reason = Budget(2**20, split_seconds=1.0, cluster_bytes=1e9).decide(e)
    assert decision == SKIP and "over the cluster's memory" in reason and "10,000 × 10,000" in reason
    # short, but its Jacobians over the block budget: split all the same (no process holds them)
    decision, reason = Budget(2**31, split_seconds=1000.0, cluster_bytes=1e10).decide(e)
    assert decision == SPLIT and "> the block budget 67.1 MB" in reason
    assert Budget(2**31, split_seconds=1000.0, cluster_bytes=1e10, block_bytes=5e9).decide(e)[0] == "run"  # whole
    assert Budget(2**20, split_seconds=1000.0, cluster_bytes=1e10).decide(e)[0] == SKIP  # over the per-process budget


def test_a_short_case_splits_when_checked_in_one_process_it_would_exceed_the_block_budget():
    e = Estimate(columns=1_500, rows=2_000, itemsize=8, seconds=0.5)  # 48 MB of Jacobians, 72 MB held
    decision, reason = Budget(2**31, split_seconds=4.0, cluster_bytes=1e10).decide(e)
    assert (
        decision == SPLIT and "Jacobians of 48 MB, checked in one process about 72 MB > the block budget 67.1" in reason
    )
    assert Budget(2**31, split_seconds=4.0, cluster_bytes=1e10, block_bytes=80e6).decide(e)[0] == "run"


def test_outside_ray_a_short_case_over_the_block_budget_runs_whole(monkeypatch):
    monkeypatch.setattr(budget_module, "cluster_memory", lambda: None)
    e = Estimate(columns=3_000, rows=3_000, itemsize=8, seconds=0.5)  # 144 MB
    assert Budget(2**30, split_seconds=4.0).decide(e)[0] == "run"


def test_the_23_tb_sample_gets_the_cluster_verdict_with_its_estimate():
    e = Estimate(columns=1_200_000, rows=1_200_000, itemsize=8, seconds=1e6)
    decision, reason = Budget(2**30, split_seconds=4.0, cluster_bytes=24e9).decide(e)
    assert decision == SKIP and "23 TB" in reason


def test_a_complex_output_holds_the_jacobians_of_both_parts():
    """torch checks a complex output's real and imaginary parts, each with its own numerical and
    analytical Jacobians (a case of complex ``diagonal_scatter`` grew by 87 MB for 33 MB estimated)."""
    z = torch.linspace(0.1, 0.9, 40, dtype=torch.float64).to(torch.complex128).requires_grad_()
    call = (CheckCall("gradcheck", {"fast_mode": False}),)
    both = estimate(BuiltCase(CASE, torch.sin, (z,), call, "fp"))
    assert both.parts == 2 and both.bytes == 2 * 2 * 40 * 40 * 16
    assert "of each of the real and imaginary parts" in both.describe()
    real = estimate(BuiltCase(CASE, torch.abs, (z,), call, "fp"))  # a complex input, a real output
    assert real.parts == 1 and real.bytes == 2 * 40 * 40 * 16
    grads = estimate(BuiltCase(CASE, torch.abs, (z,), (CheckCall("gradgradcheck", {"fast_mode": False}),), "fp"))
    assert grads.parts == 2  # gradgradcheck's function returns the (complex) input's gradient
