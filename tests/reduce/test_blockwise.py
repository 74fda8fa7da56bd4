"""Blockwise comparison: with a tiny block budget, the same verdicts and messages, character
for character, as comparing whole Jacobians; the report's window is the whole path's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import distcheck
from distcheck.executors.serial import SerialExecutor, SerialResults
from distcheck.kinds import Fallback
from distcheck.numerics.blocks import PRINT_THRESHOLD, Printed, stand_in
from distcheck.reduce.blockwise import LocalBlocks
from distcheck.storage import blocks as artifacts
from tests.parity.cases import ALL
from tests.parity.runner import run
from tests.test_parity import MODE_RUNS


class Pieces:
    """Every Jacobian cut into chunks of ``size`` columns or rows."""

    needs_costs = False

    def __init__(self, size: int):
        self.size = size

    def chunks(self, workload):
        return [(s, min(s + self.size, workload.items)) for s in range(0, workload.items, self.size)] or [(0, 0)]


class Blockwise(SerialExecutor):
    """The serial executor in chunks, its results compared block by block (in this process)
    whenever a stage's Jacobians exceed ``budget`` bytes."""

    def __init__(self, size: int = 2, budget: float = 0):
        super().__init__()
        self.policy, self.budget, self.stages = Pieces(size), budget, 0

    def submit(self, subject, units) -> SerialResults:
        results = super().submit(subject, units)
        results.blocks = Counting(results, self.budget, self)
        return results


class Counting(LocalBlocks):
    def __init__(self, results, budget, owner):
        super().__init__(results, budget)
        self.owner = owner

    def run(self, jobs):
        self.owner.stages += 1
        return super().run(jobs)


def _same_outcome(case, size, **options):
    """The same chunks judged whole (an infinite budget) and block by block (a budget of none)."""
    whole, blockwise = Blockwise(size, budget=float("inf")), Blockwise(size)
    expected = run(case, "distcheck", executor=whole, **options)
    assert whole.stages == 0
    got = run(case, "distcheck", executor=blockwise, **options)
    assert (got.verdict, got.message, got.warned_precision) == (
        expected.verdict,
        expected.message,
        expected.warned_precision,
    )
    return blockwise


@pytest.mark.filterwarnings("ignore:Input #0 requires gradient and is not a double")
@pytest.mark.parametrize("case", ALL, ids=str)
@pytest.mark.parametrize("size", [1, 3])
def test_parity_cases_give_the_whole_jacobian_messages(case, size):
    _same_outcome(case, size)


MODE_SAMPLE = {"sin", "two_outputs", "complex_sin", "real_to_complex", "wrong_scale", "missing_conjugate", "gg_complex"}
MODE_SAMPLE |= {"jvp_wrong", "transposed", "wrong_second_output", "complex_to_real_abs", "sparse_coo_dense_grad"}


@pytest.mark.filterwarnings("ignore:Input #0 requires gradient and is not a double")
@pytest.mark.parametrize(("case", "mode", "options"), [p for p in MODE_RUNS if p.values[0].name in MODE_SAMPLE])
def test_every_mode_gives_the_whole_jacobian_messages(case, mode, options):
    _same_outcome(case, 2, **options)


class Scaled(torch.autograd.Function):
    """``x * w`` elementwise, its backward off by ``wrong`` at some elements (ties included)."""

    @staticmethod
    def forward(ctx, x, w, wrong):
        ctx.save_for_backward(w, wrong)
        return x * w

    @staticmethod
    def backward(ctx, grad):
        w, wrong = ctx.saved_tensors
        return grad * (w + wrong), None, None


def _outer(x):
    return torch.outer(x[: x.numel() // 2], x[x.numel() // 2 :]).reshape(-1)


CHECKS = {
    "diagonal, summarized, ties": (300, lambda n: torch.where(torch.arange(n) % 7 == 3, 0.5, 0.0)),
    "diagonal, nan and inf": (40, lambda n: torch.where(torch.arange(n) % 5 == 1, float("nan"), float("inf"))),
    "diagonal, one element": (60, lambda n: torch.where(torch.arange(n) == 59, 0.1, 0.0)),
}


@pytest.mark.parametrize("name", CHECKS)
@pytest.mark.parametrize("size", [7, 64])
def test_large_failing_blocks_give_the_whole_jacobian_message_and_window(name, size):
    n, wrong = CHECKS[name]
    x = torch.randn(n, dtype=torch.float64, generator=torch.Generator().manual_seed(0)).requires_grad_()
    w = torch.linspace(-2, 2, n, dtype=torch.float64)
    errors = []
    for budget in (float("inf"), 0):
        executor = Blockwise(size, budget)
        with pytest.raises(distcheck.GradcheckError) as raised:
            distcheck.gradcheck(Scaled.apply, (x, w, wrong(n).double()), executor=executor)
        errors.append(raised.value)
    assert executor.stages >= 1
    whole, blockwise = errors
    assert str(blockwise) == str(whole)
    kept_whole, kept_blockwise = artifacts.bounded(whole.blocks), artifacts.bounded(blockwise.blocks)
    assert kept_blockwise.arrays().keys() == kept_whole.arrays().keys()
    for key, value in kept_whole.arrays().items():
        assert np.array_equal(kept_blockwise.arrays()[key], value, equal_nan=value.dtype.kind in "fc"), key


def _off(func):
    """``func`` scaled where nonzero: checked with atol = rtol = 0, it fails (finite differences are inexact)."""
    return lambda v: (lambda y: torch.where(y.abs() > 0, y * 1.0001, y))(func(v))


def test_a_summarized_message_of_a_wide_and_a_tall_block():
    """Blocks with a dimension of at most six elements print it whole, summarized or not."""

    def wide(x):  # 3 inputs x 1200 outputs
        return (x[:, None] * torch.arange(1200, dtype=torch.float64)).reshape(-1)

    for func, n in ((wide, 3), (lambda x: x.sum().expand(2) * 1.0 + x[:2], 1500)):
        x = torch.randn(n, dtype=torch.float64, generator=torch.Generator().manual_seed(1)).requires_grad_()
        messages = []
        for budget in (float("inf"), 0):
            with pytest.raises(distcheck.GradcheckError) as raised:
                distcheck.gradcheck(_off(func), (x,), executor=Blockwise(101, budget), atol=0, rtol=0)
            messages.append(str(raised.value))
        assert messages[0] == messages[1]


@pytest.mark.parametrize("shape", [(1, 2000), (2000, 1), (5, 300), (300, 5), (40, 40), (7, 150), (31, 33), (10, 100)])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128, np.float32])
def test_a_stand_in_prints_as_its_block(shape, dtype):
    from distcheck.engines import get_engine
    from distcheck.numerics.blocks import printed_indices

    rng = np.random.default_rng(0)
    block = (rng.standard_normal(shape) * 10.0 ** rng.integers(-8, 8, shape)).astype(dtype)
    if dtype == np.complex128:
        block = block + 1j * rng.standard_normal(shape)
    rows, columns = printed_indices(shape[0], shape), printed_indices(shape[1], shape)
    printed = Printed(rows, columns, block[np.ix_(rows, columns)], block[np.ix_(rows, columns)])
    small = stand_in(shape, block.dtype, [(printed, printed.numerical)])
    assert small.size <= max(block.size, 8 * PRINT_THRESHOLD)
    for engine in ("torch", "numpy"):
        fmt = get_engine(engine).format_block
        assert fmt(small) == fmt(block)


def test_the_serial_executor_over_its_block_budget_never_joins_the_jacobians(monkeypatch):
    """A runner checks a case in one process with the block budget: over it, the comparison
    runs block jobs on the units' results, with the joined comparison's message."""
    import distcheck.plan.comparisons as comparisons

    jobs = []
    real = comparisons.run_job
    monkeypatch.setattr(comparisons, "run_job", lambda job, fetch: jobs.append(job) or real(job, fetch))
    n = 60
    x = torch.linspace(-1, 1, n, dtype=torch.float64).requires_grad_()
    w = torch.linspace(0.5, 2, n, dtype=torch.float64)
    wrong = torch.where(torch.arange(n) % 9 == 4, 0.25, 0.0).double()
    messages = []
    for executor in (SerialExecutor(), SerialExecutor(block_bytes=3 * 2 * n * n * 8 - 1)):
        with pytest.raises(distcheck.GradcheckError) as raised:
            distcheck.gradcheck(Scaled.apply, (x, w, wrong), executor=executor)
        messages.append(str(raised.value))
        assert (len(jobs) > 0) == (executor.block_bytes != float("inf"))  # its summary, then its window
    assert messages[0] == messages[1]
    before = len(jobs)
    assert distcheck.gradcheck(Scaled.apply, (x, w, torch.zeros(n, dtype=torch.float64)), executor=executor)
    assert len(jobs) == before + 1
    # within the budget (the joined comparison's three times the Jacobians): joined, no job
    assert distcheck.gradcheck(torch.sin, (x,), executor=SerialExecutor(block_bytes=3 * 2 * n * n * 8))
    assert len(jobs) == before + 1


FORCE = distcheck.Batching(measure=False, min_seconds=0)


@pytest.mark.filterwarnings("ignore:Input #0 requires gradient and is not a double")
@pytest.mark.parametrize(
    "case", [c for c in ALL if c.name in MODE_SAMPLE | {"gg_matmul", "conv2d", "softmax"}], ids=str
)
def test_batched_comparisons_block_by_block_give_the_whole_messages(case):
    """Batched comparisons judged block by block (their clear pass, and their twin): the messages
    of the whole path, and of the element-by-element path."""
    _same_outcome(case, 2, vectorize=FORCE)
    assert run(case, "distcheck", executor=Blockwise(2), vectorize=FORCE).message == run(case, "distcheck").message


class OffVmapped(torch.autograd.Function):
    """``x * w`` whose backward is off by ``wrong`` at some elements, with a vmap rule."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x, w, wrong):
        return x * w

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[1], inputs[2])

    @staticmethod
    def backward(ctx, grad):
        w, wrong = ctx.saved_tensors
        return grad * (w + wrong), None, None


def test_a_large_failing_batched_comparison_block_by_block_gives_the_exact_message():
    n = 300
    x = torch.randn(n, dtype=torch.float64, generator=torch.Generator().manual_seed(0)).requires_grad_()
    w = torch.linspace(-2, 2, n, dtype=torch.float64)
    wrong = torch.where(torch.arange(n) % 7 == 3, 0.5, 0.0).double()
    messages, counts = [], distcheck.BatchCounts()
    for executor, vectorize in (
        (SerialExecutor(), False),
        (Blockwise(64), FORCE),
        (Blockwise(64, float("inf")), FORCE),
    ):
        with pytest.raises(distcheck.GradcheckError) as raised:
            distcheck.gradcheck(
                OffVmapped.apply, (x, w, wrong), executor=executor, vectorize=vectorize, batch_counts=counts
            )
        messages.append(str(raised.value))
    assert messages[0] == messages[1] == messages[2]
    assert dict(counts.fallbacks) == {Fallback.FAILURE: 2}
