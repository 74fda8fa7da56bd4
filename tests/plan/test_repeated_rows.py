"""The second run of a unit's analytical rows is compared as it comes, not held: its repeat
difference must be the one of both runs held whole (max |first - second|, NaN propagating, a row
one run gave and the other did not counted against zero, the second run cast as a store casts)."""

import numpy as np
import pytest
import torch

import distcheck
from distcheck.numerics.compare import max_abs_difference
from distcheck.options import Batching
from distcheck.plan.units import results
from distcheck.plan.units.results import GradientRows, RepeatedRows, RowsResult
from distcheck.plan.units.slots import InputSlot

SLOTS = (InputSlot(0, (2, 3), "float64"), InputSlot(1, (4,), "float64"))
ROWS = 5


def _held_whole(puts_first, puts_second) -> list[float]:
    """The repeat difference as both runs held whole would give it."""
    first, second = GradientRows(SLOTS, ROWS), GradientRows(SLOTS, ROWS)
    for run, puts in ((first, puts_first), (second, puts_second)):
        for k, at, grads in puts:
            run.put(k, at, grads, grads.shape[1:] if isinstance(at, slice) else grads.shape)
    return [max_abs_difference(a, b) for a, b in zip(first.blocks(), second.blocks())]


def _compared(puts_first, puts_second) -> RowsResult:
    first = GradientRows(SLOTS, ROWS)
    second = RepeatedRows(first)
    for run, puts in ((first, puts_first), (second, puts_second)):
        for k, at, grads in puts:
            run.put(k, at, grads, grads.shape[1:] if isinstance(at, slice) else grads.shape)
    return RowsResult.of(first, second)


def _rows(seed: int, count: int, shape: tuple[int, ...], dtype=np.float64) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((count, *shape)).astype(dtype)


def _same(a: list[float], b: list[float]) -> bool:
    return all((np.isnan(x) and np.isnan(y)) or x == y for x, y in zip(a, b, strict=True))


CASES = {
    "equal runs": (
        [(0, slice(0, 5), _rows(1, 5, (2, 3))), (1, slice(0, 5), _rows(2, 5, (4,)))],
        [(0, slice(0, 5), _rows(1, 5, (2, 3))), (1, slice(0, 5), _rows(2, 5, (4,)))],
    ),
    "different runs, in batches": (
        [(0, slice(0, 3), _rows(1, 3, (2, 3))), (0, slice(3, 5), _rows(3, 2, (2, 3)))],
        [(0, slice(0, 2), _rows(4, 2, (2, 3))), (0, slice(2, 5), _rows(5, 3, (2, 3)))],
    ),
    "a row only the first run gave": (
        [(1, 0, np.full(4, 7.0)), (1, 3, np.full(4, -2.0))],
        [(1, 0, np.full(4, 7.5))],
    ),
    "a row only the second run gave": (
        [(1, 0, np.full(4, 1.0))],
        [(1, 0, np.full(4, 1.0)), (1, 4, np.full(4, -3.0))],
    ),
    "NaN in the second run": (
        [(0, slice(0, 5), _rows(1, 5, (2, 3)))],
        [(0, slice(0, 5), np.where(_rows(1, 5, (2, 3)) > 1, np.nan, _rows(1, 5, (2, 3))))],
    ),
    "NaN in a row only the first run gave": (
        [(1, 2, np.array([np.nan, 0, 0, 0]))],
        [],
    ),
    "float32 gradients cast as a store casts": (
        [(1, slice(0, 5), _rows(6, 5, (4,), np.float32))],
        [(1, slice(0, 5), _rows(6, 5, (4,)) + 1e-9)],
    ),
    "complex gradients of a real input keep their real part": (
        [(1, slice(0, 5), _rows(6, 5, (4,)) + 1j)],
        [(1, slice(0, 5), _rows(6, 5, (4,)) - 1j)],
    ),
    "a gradient of another shape, same element count": (
        [(0, slice(0, 5), _rows(1, 5, (3, 2)))],
        [(0, slice(0, 5), _rows(1, 5, (6,)) * 2)],
    ),
    "a gradient of another element count is not stored": (
        [(0, slice(0, 5), _rows(1, 5, (7,)))],
        [(0, slice(0, 5), _rows(1, 5, (2, 3)))],
    ),
    "nothing given": ([], []),
}


@pytest.mark.parametrize("waiting_bytes", [results.WAITING_BYTES, 1], ids=["rows compared at the end", "row by row"])
@pytest.mark.parametrize("name", CASES)
def test_the_repeat_difference_is_the_one_of_both_runs_held_whole(name, waiting_bytes, monkeypatch):
    monkeypatch.setattr(results, "WAITING_BYTES", waiting_bytes)
    puts_first, puts_second = CASES[name]
    result = _compared(puts_first, puts_second)
    assert _same(result.repeat_difference, _held_whole(puts_first, puts_second))


def test_the_wrong_size_and_dtype_of_either_run_are_described():
    first_only = _compared([(0, slice(0, 5), _rows(1, 5, (3, 2)))], [(0, slice(0, 5), _rows(1, 5, (2, 3)))])
    assert "has shape (3, 2)" in first_only.wrong_size
    second_only = _compared([(1, slice(0, 5), _rows(6, 5, (4,)))], [(1, slice(0, 5), _rows(6, 5, (4,), np.float32))])
    assert second_only.wrong_size is None and "has dtype float32" in second_only.wrong_dtype


class _NotReentrant(torch.autograd.Function):
    """Doubles its input; its backward's gradient grows by one each call (not reentrant)."""

    calls = 0

    @staticmethod
    def forward(ctx, x):
        return 2 * x

    @staticmethod
    def backward(ctx, g):
        _NotReentrant.calls += 1
        return 2 * g + _NotReentrant.calls * 1e-3


@pytest.mark.parametrize("vectorize", [False, Batching(measure=False, most_items=4)], ids=["loop", "batched"])
def test_a_backward_that_is_not_reentrant_fails_as_torchs_does(vectorize):
    x = torch.randn(20, dtype=torch.float64, requires_grad=True)
    with pytest.raises(Exception) as torchs:
        torch.autograd.gradcheck(_NotReentrant.apply, (x,))
    with pytest.raises(distcheck.GradcheckError) as ours:
        distcheck.gradcheck(_NotReentrant.apply, (x,), vectorize=vectorize)
    assert "reentrant" in str(torchs.value) and "reentrant" in str(ours.value)
