import pickle
from dataclasses import replace

import numpy as np
import pytest
import torch

from distcheck.check import plan_check
from distcheck.executors.serial import SerialExecutor
from distcheck.options import CheckOptions
from distcheck.plan.chunking import Whole, Workload, even_ranges
from distcheck.plan.cost_model import CostModel, unit_bytes
from distcheck.plan.stages import Auxiliary, JacobianComparison, ZeroNumericalJacobian
from distcheck.plan.units import AnalyticalRows, NumericalColumns
from distcheck.reduce.reducer import assembled_jacobians


class Pieces:
    """A policy that cuts everything into pieces of ``size`` items."""

    needs_costs = False

    def __init__(self, size):
        self.size = size

    def chunks(self, workload):
        return [(s, min(s + self.size, workload.items)) for s in range(0, workload.items, self.size)]


class ChunkedSerial(SerialExecutor):
    def __init__(self, size):
        super().__init__()
        self.policy = Pieces(size)


def _x(*shape, dtype=torch.float64):
    return torch.randn(*shape, dtype=dtype, generator=torch.Generator().manual_seed(0)).requires_grad_()


def test_even_ranges_cover_everything_in_order():
    assert even_ranges(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert even_ranges(2, 5) == [(0, 1), (1, 2)]
    assert even_ranges(0, 3) == [(0, 0)]
    assert Whole().chunks(Workload(7)) == [(0, 7)]


def test_stages_follow_the_reference_order():
    _, plan = plan_check(lambda x: x.sin(), (_x(3),), CheckOptions(), SerialExecutor())
    assert [type(s) for s in plan.stages] == [JacobianComparison, Auxiliary, Auxiliary]
    assert [plan.units[s.unit].check for s in plan.stages[1:]] == ["zero_grad_output", "undefined_grad"]


def test_complex_outputs_check_imaginary_then_real_parts():
    _, plan = plan_check(torch.sin, (_x(3, dtype=torch.complex128),), CheckOptions(), SerialExecutor())
    comparisons = [s for s in plan.stages if isinstance(s, JacobianComparison)]
    assert [s.part for s in comparisons] == ["imag", "real"]
    assert set(plan.subject.variants) == {"f", "imag", "real", "parts"}
    # one set of finite differences for both parts: the imaginary parts' outputs, then the real
    assert comparisons[0].numerical == comparisons[1].numerical
    assert [s.numerical_outputs for s in comparisons] == [(0, 1), (1, 2)]
    (unit,) = {plan.units[u] for units in comparisons[0].numerical for u in units}
    assert unit.variant == "parts" and len(unit.outputs) == 2


def test_no_differentiable_output_plans_a_zero_check():
    _, plan = plan_check(lambda x: (x > 0).double(), (_x(3),), CheckOptions(), SerialExecutor())
    assert isinstance(plan.stages[0], ZeroNumericalJacobian)


def test_chunking_splits_columns_and_rows():
    _, plan = plan_check(lambda x: x.exp(), (_x(10),), CheckOptions(vectorize=False), ChunkedSerial(3))
    columns = [u for u in plan.units if isinstance(u, NumericalColumns)]
    rows = [u for u in plan.units if isinstance(u, AnalyticalRows)]
    assert [(u.start, u.stop) for u in columns] == [(0, 3), (3, 6), (6, 9), (9, 10)]
    assert [(u.start, u.stop) for u in rows] == [(0, 3), (3, 6), (6, 9), (9, 10)]


@pytest.mark.parametrize("size", [1, 2, 5])
@pytest.mark.parametrize("forward", [False, True])
def test_chunked_jacobians_are_bitwise_identical_to_whole(size, forward):
    inputs = (_x(2, 3, dtype=torch.complex128), _x(3))
    func = lambda z, y: (z * y).sin()  # noqa: E731
    options = CheckOptions(check_forward_ad=forward)
    whole_plan = plan_check(func, inputs, options, SerialExecutor())[1]
    chunked_plan = plan_check(func, inputs, options, ChunkedSerial(size))[1]
    whole = assembled_jacobians(whole_plan, SerialExecutor().submit(whole_plan.subject, whole_plan.units))
    chunked = assembled_jacobians(chunked_plan, SerialExecutor().submit(chunked_plan.subject, chunked_plan.units))
    assert whole.keys() == chunked.keys() and whole
    for key in whole:
        assert whole[key].tobytes() == chunked[key].tobytes(), key


@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize("sparse", [False, True])
def test_shared_finite_differences_of_both_parts_are_bitwise_those_of_each_part_alone(fast, sparse):
    """The units of both parts evaluate the function once (the "parts" variant); each part's
    outputs of them are exactly what finite differences of that part's own function give."""
    z = _x(2, 3, dtype=torch.complex128)
    y = _x(3).detach().to_sparse().requires_grad_() if sparse else _x(3)
    dense = lambda y: y.to_dense() if y.layout != torch.strided else y  # noqa: E731
    func = lambda z, y: ((z * dense(y)).sin(), (z * dense(y)).sum())  # noqa: E731  two complex outputs
    _, plan = plan_check(func, (z, y), CheckOptions(fast_mode=fast, masked=False), ChunkedSerial(2))
    stages = [s for s in plan.stages if getattr(s, "part", None)]
    assert [s.numerical_outputs for s in stages] == [(0, 2), (2, 4)]
    shared = [u for units in stages[0].numerical for u in ((units,) if fast else units)]
    assert len(shared) == (2 if fast else 5)  # chunks of 2 columns: z's 6 in 3, y's 3 in 2
    run = lambda units: SerialExecutor().submit(plan.subject, units)  # noqa: E731
    together = run([plan.units[u] for u in shared])
    for stage in stages:
        start, stop = stage.numerical_outputs
        # the same units, on the part's own function (its sparse twin where the input is sparse)
        alone = [
            replace(
                plan.units[u],
                variant=plan.units[u].variant.replace("parts", stage.variant),
                outputs=plan.units[u].outputs[start:stop],
            )
            for u in shared
        ]
        for u in alone:
            if u.variant not in plan.subject.variants:
                plan.subject.variants[u.variant] = replace(
                    plan.subject.variants[stage.variant], inputs=plan.subject.variants["parts#dense"].inputs
                )
        separate = run(alone)
        for k in range(len(shared)):
            mine, theirs = together.get(k).unwrap(), separate.get(k).unwrap()
            mine = mine.blocks if hasattr(mine, "blocks") else mine
            theirs = theirs.blocks if hasattr(theirs, "blocks") else theirs
            assert len(theirs) == 2 and all(b is not None for b in theirs)
            for a, b in zip(mine[start:stop], theirs):
                assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_units_and_subject_pickle():
    _, plan = plan_check(torch.sin, (_x(3),), CheckOptions(), SerialExecutor())
    for unit in plan.units:
        assert pickle.loads(pickle.dumps(unit)) == unit
    subject = pickle.loads(pickle.dumps(plan.subject))
    assert torch.equal(subject.variants["f"].inputs[0], plan.subject.variants["f"].inputs[0])


def test_numerical_blocks_have_the_reference_layout():
    a = torch.arange(6.0, dtype=torch.float64).reshape(2, 3)
    _, plan = plan_check(lambda x: a @ x, (_x(3),), CheckOptions(), SerialExecutor())
    jacobians = assembled_jacobians(plan, SerialExecutor().submit(plan.subject, plan.units))
    np.testing.assert_allclose(jacobians[("f", "backward", "numerical", 0, 0)], a.numpy().T, atol=1e-8)
    np.testing.assert_array_equal(jacobians[("f", "backward", "analytical", 0, 0)], a.numpy().T)


def test_fast_mode_plans_projections_and_keeps_the_global_rng():
    from distcheck.plan.stages import ProjectedComparison

    torch.manual_seed(3)
    before = torch.get_rng_state()
    _, plan = plan_check(torch.sin, (_x(4, 5),), CheckOptions(fast_mode=True), SerialExecutor())
    assert torch.equal(before, torch.get_rng_state())
    stage = plan.stages[0]
    assert isinstance(stage, ProjectedComparison)
    u, v = plan.subject.data[stage.u[0][0]], plan.subject.data[stage.v[0]]
    assert u.shape == (20,) and v.shape == (20,)
    assert abs(np.linalg.norm(u) - 1) < 1e-12 and (u >= 0).all()


def test_fast_mode_makes_the_units_that_explain_a_failure_only_when_asked():
    _, plan = plan_check(torch.sin, (_x(4, 5),), CheckOptions(fast_mode=True), SerialExecutor())
    numerical, analytical = plan.stages[0].explain(0, 0)  # input 0, output 0: whole Jacobians
    assert isinstance(numerical, NumericalColumns) and (numerical.start, numerical.stop) == (0, 20)
    assert isinstance(analytical, AnalyticalRows) and (analytical.start, analytical.stop) == (0, 20)
    assert numerical not in plan.units and analytical not in plan.units


def test_forward_mode_of_complex_inputs_checks_imaginary_then_real_parts():
    _, plan = plan_check(
        torch.sin, (_x(3, dtype=torch.complex128),), CheckOptions(check_forward_ad=True), SerialExecutor()
    )
    forward = [s for s in plan.stages if isinstance(s, JacobianComparison) and s.mode == "forward"]
    assert [s.part for s in forward] == ["imag", "real"]


def test_batched_checks_come_after_the_jacobians():
    options = CheckOptions(check_forward_ad=True, check_batched_forward_grad=True, check_batched_grad=True)
    _, plan = plan_check(lambda x, y: x * y, (_x(3), _x(3)), options, SerialExecutor())
    checks = [plan.units[s.unit].check for s in plan.stages if isinstance(s, Auxiliary)]
    assert checks == [
        "undefined_forward_grad",
        "batched_forward_grad",
        "batched_forward_grad",
        "batched_grad",
        "zero_grad_output",
        "undefined_grad",
    ]


class _Timed:
    """An executor stub whose policy sizes work in seconds, settling plans under ``below``."""

    def __init__(self, below: float):
        self.policy = CostModel(workers=2, settled_below=below)


@pytest.mark.parametrize("below", [1e9, 0.0])
def test_a_check_is_planned_again_with_its_best_timings_unless_one_timing_settles_it(below):
    """One timing of each call plans a check whose work so estimated is under the policy's
    ``settled_below``; above it, the calls are timed again and the check planned anew, drawing
    its batched checks' random vectors again from the same RNG state: the same plan data and
    the same global RNG after it as a check planned once."""
    calls = []

    def func(x):
        calls.append(None)
        return x.sin()

    options = CheckOptions(check_batched_grad=True)
    torch.manual_seed(3)
    _, once = plan_check(torch.sin, (_x(3),), options, _Timed(1e9))
    after_once = torch.get_rng_state()
    torch.manual_seed(3)
    _, plan = plan_check(func, (_x(3),), options, _Timed(below))
    assert torch.equal(torch.get_rng_state(), after_once)
    data, again = once.subject.data, plan.subject.data
    assert data.keys() == again.keys() and any("batched" in k for k in data)
    assert all(np.array_equal(data[k], again[k]) for k in data)
    assert once.subject.costs is not None and plan.subject.costs is not None
    # the reference call, one evaluation timed, the backward pass's graph; planned anew: more timings
    assert (len(calls) <= 3) == (below > 0)


def test_under_a_block_budget_no_unit_or_task_holds_more_than_half_of_it():
    """Column units' results, row units' rows (one run held: the second is compared as it
    comes), and a task's units together: each at most half the budget (a block job holds two
    results; a chunk task, its units' results)."""

    class Budgeted(SerialExecutor):
        def __init__(self, budget):
            super().__init__()
            self.policy = CostModel(workers=2, block_bytes=budget)

    budget = 20 * 100 * 8  # bytes: 20 rows or columns of the 100 × 100 float64 Jacobian
    _, plan = plan_check(lambda x: x.exp().cumsum(0), (_x(100),), CheckOptions(), Budgeted(budget))
    columns = [u for u in plan.units if isinstance(u, NumericalColumns)]
    rows = [u for u in plan.units if isinstance(u, AnalyticalRows)]
    assert max(u.size for u in columns) * 100 * 8 <= budget / 2 and sum(u.size for u in columns) == 100
    assert max(u.size for u in rows) * 100 * 8 <= budget / 2 and sum(u.size for u in rows) == 100
    tasks = CostModel(workers=2, block_bytes=budget).tasks(plan.units, plan.subject.costs)
    assert sorted(k for task in tasks for k in task) == list(range(len(plan.units)))
    assert all(sum(unit_bytes(plan.units[k]) for k in task) <= budget / 2 for task in tasks)
    unbounded = CostModel(workers=2).tasks(plan.units, plan.subject.costs)
    assert len(unbounded) < len(tasks)  # the budget, not the time, cut these
