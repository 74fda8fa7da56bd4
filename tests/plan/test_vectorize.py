"""Batched Jacobian blocks decide only clear passes: on traps that a batch gets wrong, or that
sit at the tolerance, the verdict and message are torch's, and the fallback says why."""

from __future__ import annotations

import time

import pytest
import torch
import torch.nn.functional as F

import distcheck
from distcheck import BatchCounts, Batching
from distcheck.check import plan_check
from distcheck.executors.serial import SerialExecutor
from distcheck.kinds import Fallback
from distcheck.options import CheckOptions
from distcheck.plan import batch_choice
from distcheck.plan.stages import BatchedComparison, JacobianComparison, ZeroNumericalJacobian
from distcheck.plan.units import AnalyticalRows, ForwardColumns, NumericalColumns
from tests.catalogue import torch_functions as tf

FORCE = Batching(measure=False, min_seconds=0)  # batch whatever the engine can, untimed
MEASURED = Batching(min_seconds=0)  # decided at planning, with any workload worth timing


@pytest.fixture(autouse=True)
def _forget():
    batch_choice.forget()
    yield
    batch_choice.forget()


def _x(*shape, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=dtype, generator=g).requires_grad_()


def _outcome(check, func, inputs, **options):
    """(verdict, message) of a check: "pass", or the exception's type and message."""
    try:
        check(func, inputs, **options)
    except Exception as e:
        return type(e).__mro__[1].__name__ if type(e).__name__.startswith("Torch") else type(e).__name__, str(e)
    return "pass", ""


def _side_by_side(func, inputs, batching=FORCE, gradgrad=False, same_numbers=True, **options):
    """Run torch's check, distcheck's element by element and distcheck's batched, each from the
    same global RNG state: the batched verdict and message are the element-by-element ones
    (message for message; the first line only when the function's numbers change from call to
    call), of torch's kind. Returns the verdict and the batched check's counts."""
    torch_check = torch.autograd.gradgradcheck if gradgrad else torch.autograd.gradcheck
    ours = distcheck.gradgradcheck if gradgrad else distcheck.gradcheck
    torch.manual_seed(0)
    reference = _outcome(torch_check, func, inputs, **options)
    torch.manual_seed(0)
    exact = _outcome(ours, func, inputs, vectorize=False, **options)
    counts = BatchCounts()
    torch.manual_seed(0)
    batched = _outcome(ours, func, inputs, vectorize=batching, batch_counts=counts, **options)
    kept = (lambda m: m) if same_numbers else (lambda m: m.splitlines()[0] if m else m)
    assert (batched[0], kept(batched[1])) == (exact[0], kept(exact[1]))
    assert (batched[0], batched[1].split(",")[0]) == (reference[0], reference[1].split(",")[0])
    return batched[0], counts


# -- traps ------------------------------------------------------------------------------------


def test_a_closure_over_the_input_is_judged_element_by_element():
    """``b * seen`` where ``seen`` shares the input's memory: finite differences in place move
    it too (torch finds a mismatch); a batch of copies would not, and would pass."""
    x = _x(12)
    seen = x.detach()
    verdict, counts = _side_by_side(lambda b: b * seen, (x,), MEASURED)
    assert verdict == "GradcheckError" and counts.fallbacks == {Fallback.CLOSURE: 1}


def test_a_closure_over_one_element_is_found_too():
    x = _x(12)
    seen = x.detach()
    verdict, counts = _side_by_side(lambda b: b * seen[5], (x,), MEASURED)
    assert verdict == "GradcheckError" and counts.fallbacks == {Fallback.CLOSURE: 1}


class WrongVmapRule(torch.autograd.Function):
    """x * 2 whose vmap rule computes x * 3, and whose backward agrees with the vmap rule (3):
    batched, numerical and analytical Jacobians agree; torch's loop finds 2 against 3."""

    @staticmethod
    def forward(a):
        return a * 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        return g * 3

    @staticmethod
    def vmap(info, in_dims, a):
        return a * 3, in_dims[0]


class WrongVmapRightBackward(WrongVmapRule):
    @staticmethod
    def backward(ctx, g):
        return g * 2


def test_a_wrong_vmap_rule_consistent_with_a_wrong_backward_fails_as_torch():
    verdict, counts = _side_by_side(WrongVmapRule.apply, (_x(12),))
    assert verdict == "GradcheckError" and counts.fallbacks == {Fallback.FAILURE: 1}


def test_a_wrong_vmap_rule_is_caught_by_the_spot_check():
    verdict, counts = _side_by_side(WrongVmapRightBackward.apply, (_x(12),))
    assert verdict == "pass" and counts.fallbacks == {Fallback.SPOT_CHECK: 1}


def test_data_dependent_shapes_item_and_randomness_are_judged_element_by_element():
    for func, reason in [
        (lambda b: b * b.nonzero().shape[0], Fallback.DYNAMIC_SHAPE),
        (lambda b: b.sin() * (1 + 0 * b.sum().item()), Fallback.ITEM),
        (lambda b: b.sin() + 0 * torch.rand(()), Fallback.RANDOMNESS),
    ]:
        for batching in (FORCE, MEASURED):
            batch_choice.forget()
            verdict, counts = _side_by_side(func, (_x(12),), batching)
            assert verdict == "pass" and counts.fallbacks == {reason: 1}, (reason, batching)


def test_item_in_a_wrong_function_fails_as_torch():
    verdict, counts = _side_by_side(lambda b: b * b.sum().item(), (_x(12),))
    assert verdict == "GradcheckError" and counts.fallbacks == {Fallback.FAILURE: 1}


def test_the_global_rng_after_a_batched_check_is_the_element_by_element_ones():
    func = lambda b: b.sin() + 0 * torch.rand(()) if b.requires_grad else b.sin()  # noqa: E731
    states = []
    for vectorize in (False, FORCE, MEASURED):
        torch.manual_seed(3)
        distcheck.gradcheck(func, (_x(12),), vectorize=vectorize)
        states.append(torch.get_rng_state())
    assert all(torch.equal(states[0], s) for s in states[1:])


class Off(torch.autograd.Function):
    """x * 2 whose backward is off by ``factor`` times the tolerance at every element."""

    generate_vmap_rule = True

    @staticmethod
    def forward(a, factor):
        return a * 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.factor = inputs[1]

    @staticmethod
    def backward(ctx, g):
        return g * (2 + ctx.factor * (1e-5 + 1e-3 * 2)), None


@pytest.mark.parametrize(
    ("factor", "verdict", "reasons"),
    [
        (0.3, "pass", {}),  # clear: decided batched
        (0.999, "pass", {Fallback.NEAR_TOLERANCE: 1}),
        (1.001, "GradcheckError", {Fallback.FAILURE: 1}),
    ],
)
def test_errors_near_the_tolerance_are_judged_element_by_element(factor, verdict, reasons):
    got, counts = _side_by_side(lambda b: Off.apply(b, factor), (_x(12),))
    assert got == verdict and counts.fallbacks == reasons and counts.batched == (0 if reasons else 1)


class Drifting(torch.autograd.Function):
    """exp whose backward drifts by 1e-9 (relative) at each call, batched or not: a counter, no
    RNG. Not reentrant within nondet_tol 0; within 1e-6."""

    generate_vmap_rule = True
    calls = 0
    batched_only = False

    @staticmethod
    def forward(a):
        return a.exp()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @classmethod
    def drift(cls, g) -> float:
        if cls.batched_only and not torch._C._functorch.is_legacy_batchedtensor(g):
            return 1.0
        cls.calls += 1
        return 1 + 1e-9 * cls.calls

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y * Drifting.drift(g)


@pytest.mark.parametrize(
    ("nondet_tol", "verdict", "reasons"), [(0.0, "GradcheckError", {Fallback.FAILURE: 1}), (1e-6, "pass", {})]
)
def test_a_nondeterministic_backward_is_judged_as_torch(nondet_tol, verdict, reasons, monkeypatch):
    monkeypatch.setattr(Drifting, "calls", 0)
    got, counts = _side_by_side(Drifting.apply, (_x(12),), same_numbers=False, nondet_tol=nondet_tol)
    assert got == verdict and counts.fallbacks == reasons and counts.batched == (0 if reasons else 1)


def test_a_backward_not_reentrant_on_the_batch_alone_is_judged_element_by_element(monkeypatch):
    """A backward that drifts only when batched: the batch's two runs differ, torch's rows do not."""
    monkeypatch.setattr(Drifting, "batched_only", True)
    got, counts = _side_by_side(Drifting.apply, (_x(12),))
    assert got == "pass" and counts.fallbacks == {Fallback.NONDETERMINISTIC: 1}


def test_a_backward_drawing_random_numbers_is_judged_as_torch_the_rng_included():
    """NoisyBackward draws its noise from the global RNG: a batch draws it once, torch's loop per
    row. The batch puts the RNG back and the rows are computed element by element."""
    for nondet_tol in (0.0, 1e-6):
        states = []
        for vectorize in (False, FORCE):
            torch.manual_seed(5)
            counts = BatchCounts()
            options = {"vectorize": vectorize, "batch_counts": counts, "nondet_tol": nondet_tol}
            _outcome(distcheck.gradcheck, tf.NoisyBackward.apply, (_x(12),), **options)
            states.append(torch.get_rng_state())
        assert torch.equal(*states) and counts.batched == 0


# -- every reason -----------------------------------------------------------------------------


def _reasons(func, inputs, batching=MEASURED, **options) -> dict:
    counts = BatchCounts()
    try:
        distcheck.gradcheck(func, inputs, vectorize=batching, batch_counts=counts, **options)
    except distcheck.GradcheckError:
        pass
    return dict(counts.fallbacks)


class Slow(torch.autograd.Function):
    """x * 2 whose vmap rule, and backward when batched, take 50 ms: batches slower than the loop."""

    @staticmethod
    def forward(a):
        return a * 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        if torch._C._functorch.is_legacy_batchedtensor(g):
            _busy(0.05)
        return g * 2

    @staticmethod
    def vmap(info, in_dims, a):
        _busy(0.05)
        return a * 2, in_dims[0]


def _busy(seconds: float) -> None:
    """Spend ``seconds`` of CPU (batches are timed in CPU time)."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_every_reason_planned_is_reached():
    def matmul_vjp(a, b, g):
        return (None, None) if g is None else (g @ b.T, a.T @ g)

    import numpy as np

    matmul = distcheck.numpy_function(np.matmul, vjp=matmul_vjp)
    sparse = torch.eye(4, dtype=torch.float64).to_sparse().requires_grad_()
    cases = {
        Fallback.NO_VMAP: (matmul, (np.random.rand(4, 4), np.random.rand(4, 2))),
        Fallback.SMALL: (torch.sin, (_x(3),), Batching()),
        Fallback.SLOWER: (Slow.apply, (_x(12),)),
        # histc has no batching rule; looping it inside the batch meets .item() (the op stays exact)
        Fallback.NO_BATCHING_RULE: (lambda b: b.sin() * torch.histc(b, 4).sum().item(), (_x(12),)),
        Fallback.AUTOGRAD_FUNCTION: (tf.WrongScale.apply, (_x(12),)),
        Fallback.RANDOMNESS: (lambda b: b.sin() + 0 * torch.rand(()), (_x(12),)),
        Fallback.VMAP_ERROR: (lambda b: b * len(b.tolist()), (_x(12),)),
        Fallback.SPARSE: (lambda s: s.to_dense() * 2, (sparse,), MEASURED, {"masked": False}),
        Fallback.MEMORY: (torch.sin, (_x(12),), Batching(min_seconds=0, budget=100)),
    }
    for reason, (func, inputs, *rest) in cases.items():
        batching = rest[0] if rest else MEASURED
        options = rest[1] if len(rest) > 1 else {}
        assert reason in _reasons(func, inputs, batching, **options), reason


def test_numpy_engine_has_no_vmap_and_stays_exact():
    import numpy as np

    def vjp(a, g):
        return None if g is None else g * np.cos(a)

    sin = distcheck.numpy_function(np.sin, vjp=vjp)
    assert _reasons(sin, (np.random.rand(12),), FORCE) == {Fallback.NO_VMAP: 1}


# -- plans ------------------------------------------------------------------------------------


def test_batches_hold_at_most_the_budget():
    budget = 40 * 1000
    options = CheckOptions(vectorize=Batching(measure=False, min_seconds=0, budget=budget))
    _, plan = plan_check(lambda a: a.exp().cumsum(0), (_x(100),), options, SerialExecutor())
    batched = [u for u in plan.units if getattr(u, "batch", 0)]
    assert batched and all(u.start % u.batch == 0 for u in batched)
    # each item of a batch holds 6 times the inputs and outputs (1,600 bytes); its result, a row of 800
    assert max(u.batch for u in batched) * 6 * (800 + 800) <= budget
    assert all(u.batch * 800 * (2 if isinstance(u, AnalyticalRows) else 1) <= budget / 2 for u in batched)


def test_vectorize_false_plans_element_by_element_and_counts_nothing():
    options = CheckOptions(vectorize=False)
    _, plan = plan_check(lambda a: a.exp().cumsum(0), (_x(100),), options, SerialExecutor())
    assert all(type(s) is not BatchedComparison for s in plan.stages) and not plan.fallbacks
    assert all(not getattr(u, "batch", 0) for u in plan.units)
    counts = BatchCounts()
    assert distcheck.gradcheck(lambda a: a.exp().cumsum(0), (_x(100),), vectorize=False, batch_counts=counts)
    assert counts == BatchCounts()


def test_vectorize_false_evaluates_the_function_as_often_as_before():
    """No trial, no probe: as many calls as the element-by-element path makes."""
    calls = []

    def counted(a):
        calls.append(1)
        return a.sin()

    distcheck.gradcheck(counted, (_x(10),), vectorize=False)
    assert len(calls) == 1 + 2 * 10


def test_a_batched_plan_keeps_the_element_by_element_twin():
    options = CheckOptions(vectorize=FORCE, check_forward_ad=True)
    _, plan = plan_check(lambda a, b: (a * b).sin(), (_x(10), _x(10, seed=1)), options, SerialExecutor())
    stages = [s for s in plan.stages if isinstance(s, BatchedComparison)]
    assert len(stages) == 2  # backward and forward mode
    for stage in stages:
        assert isinstance(stage.exact, JacobianComparison)
        assert all(not getattr(u, "batch", 0) for u in stage.exact_units)
        kinds = {type(plan.units[u]) for g in (*stage.batched.numerical, *stage.batched.analytical) for u in g}
        assert kinds <= {NumericalColumns, AnalyticalRows, ForwardColumns}


@pytest.mark.parametrize("gradgrad", [False, True])
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_batched_checks_of_correct_functions_are_decided_batched(gradgrad, dtype):
    verdict, counts = _side_by_side(
        lambda a, b: (a * b).sin() * a, (_x(10, dtype=dtype), _x(10, dtype=dtype, seed=1)), gradgrad=gradgrad
    )
    assert verdict == "pass" and counts.batched >= 1 and counts.exact == 0


def _no_differentiable_output(scale):
    """A function none of whose outputs requires grad: its numerical Jacobian is ``scale``."""
    return lambda a: (scale * a.detach() * a.detach().cos()).sum(0) if scale else a.detach().argmax(-1).double()


def test_a_zero_numerical_jacobian_is_decided_batched():
    verdict, counts = _side_by_side(_no_differentiable_output(0), (_x(12, 3),))
    assert verdict == "pass" and counts.batched == 1 and counts.exact == 0


@pytest.mark.parametrize("scale", [1.0, 1e-12])
def test_a_nonzero_numerical_jacobian_without_differentiable_outputs_fails_as_torch(scale):
    """Not exactly zero, however small: the element-by-element twin judges it, with torch's message."""
    func = lambda a: (scale * a.detach().sin()).sum(0)  # noqa: E731
    verdict, counts = _side_by_side(func, (_x(12, 3),))
    assert verdict == "GradcheckError" and counts.fallbacks == {Fallback.FAILURE: 1}


def test_a_zero_jacobians_batches_are_spot_checked_bit_for_bit():
    """A batch may only say zero where torch's way says exactly zero at its spot item."""
    options = CheckOptions(vectorize=FORCE)
    _, plan = plan_check(_no_differentiable_output(0), (_x(12, 3),), options, SerialExecutor())
    (stage,) = [s for s in plan.stages if isinstance(s, BatchedComparison)]
    assert isinstance(stage.exact, ZeroNumericalJacobian)
    assert {plan.units[u].spot_tolerance for g in stage.batched.numerical for u in g} == {(0.0, 0.0)}


def test_the_batch_timed_while_planning_is_the_plans_first_batch():
    """The batch a measured decision timed is not computed again: the workload's first unit
    carries it as its first batch (one unit in-process, nothing joined), and that unit gives
    exactly what it gives computing every batch itself."""
    from dataclasses import replace

    from distcheck.plan.units import execute

    func = lambda a, b: (a * b).sin() * a  # noqa: E731
    options = CheckOptions(vectorize=replace(MEASURED, most_items=16))  # three batches a workload
    _, plan = plan_check(func, (_x(40), _x(40, seed=1)), options, SerialExecutor())
    carried = [u for u in plan.units if getattr(u, "head", None) is not None]
    assert carried and all(u.start == 0 and u.stop == 40 and u.batch < 40 for u in carried)
    for unit in carried:
        kept, again = (execute(u, plan.subject).unwrap() for u in (unit, replace(unit, head=None)))
        if isinstance(unit, AnalyticalRows):
            assert kept.repeat_difference == again.repeat_difference
            kept, again = kept.blocks, again.blocks
        for a, b in zip(kept, again):
            assert (a is None and b is None) or (a == b).all()
    assert batch_choice._recall(next(iter(batch_choice._remembered))).trial is None  # not kept per process


def _dearer_by_the_item(x):
    """``2x``, each call 200 us of CPU, a batched call another 1 us times its items squared:
    a batch of 16 costs a few us an item, one of 256 more than the loop."""
    batched = torch._C._functorch.is_batchedtensor(x)
    items = torch._C._functorch.get_unwrapped(x).numel() // x.numel() if batched else 0
    _busy(2e-4 + items * items * 1e-6)
    return x * 2


def test_a_small_batch_cheaper_an_item_than_the_largest_is_kept():
    """A workload of four batches or more has a small batch timed as well as the largest: where the
    largest costs more an item than the loop, the small one is kept, not the loop."""
    options = CheckOptions(vectorize=MEASURED)
    _, plan = plan_check(_dearer_by_the_item, (_x(1100),), options, SerialExecutor())  # 5 batches of 256
    (columns,) = [u for u in plan.units if isinstance(u, NumericalColumns) and u.batch]
    assert columns.batch == batch_choice.SMALL_BATCH and columns.head is not None  # the small trial, kept


@pytest.mark.parametrize("gradgrad", [False, True])
def test_an_operation_without_a_batching_rule_loops_inside_a_batch_kept_as_torch(gradgrad, monkeypatch):
    """histc and quantile have no batching rule: a batch in which they alone loop over the items is
    timed (here made to look faster, whatever the machine) and kept, with torch's verdict."""
    monkeypatch.setattr(batch_choice, "FASTER", float("inf"))
    monkeypatch.setattr(batch_choice, "LOOPED_FASTER", float("inf"))
    func = lambda b: b.sin() * torch.histc(b.detach(), 4).sum() + torch.quantile(b, 0.3)  # noqa: E731
    options = CheckOptions(vectorize=MEASURED)
    _, plan = plan_check(func, (_x(20),), options, SerialExecutor())
    assert any(getattr(u, "loops", False) for u in plan.units)
    batch_choice.forget()
    verdict, counts = _side_by_side(func, (_x(20),), batching=MEASURED, gradgrad=gradgrad)
    assert verdict == "pass" and counts.batched >= 1 and Fallback.NO_BATCHING_RULE not in counts.fallbacks


def test_a_looping_batch_not_clearly_faster_than_the_loop_stays_element_by_element(monkeypatch):
    monkeypatch.setattr(batch_choice, "FASTER", float("inf"))  # a batch that does not loop would be kept
    monkeypatch.setattr(batch_choice, "LOOPED_FASTER", 0.0)  # one that loops never is
    func = lambda b: b.sin() * torch.histc(b.detach(), 4).sum()  # noqa: E731
    assert _reasons(func, (_x(20),)) == {Fallback.NO_BATCHING_RULE: 1}


def test_a_decision_is_remembered_for_another_sample_of_the_op():
    """A vmap error found once is not paid for again: the second check plans without a trial."""
    func = lambda b: b.sin() * (1 + 0 * b.sum().item())  # noqa: E731
    calls = []

    def counted(b):
        calls.append(1)
        return func(b)

    for n in (12, 20):
        before = len(calls)
        assert _reasons(counted, (_x(n),)) == {Fallback.ITEM: 1}
        if n == 20:  # exactly the element-by-element path's calls (and the closure probe's two)
            assert len(calls) - before == 1 + 2 * n


def test_a_function_that_reseeds_its_draws_is_batched():
    """op_db's dropouts reseed the global RNG at each call (and put it back): every call draws
    the same mask, which a batch draws once for all its items."""
    from torch.testing._utils import wrapper_set_seed

    func = lambda b: wrapper_set_seed(F.dropout, b, p=0.5)  # noqa: E731
    torch.manual_seed(11)
    before = torch.get_rng_state()
    verdict, counts = _side_by_side(func, (_x(40),))
    torch.manual_seed(11)
    distcheck.gradcheck(func, (_x(40),), vectorize=FORCE)
    assert verdict == "pass" and counts.batched == 1 and torch.equal(torch.get_rng_state(), before)
