import numpy as np
import pytest
import torch

from distcheck.numerics.compare import adjusted_atol, allclose, close_mask, max_abs_difference, worst_element


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_close_mask_matches_torch_isclose(dtype):
    rng = np.random.default_rng(1)
    a = rng.standard_normal(500).astype(dtype)
    b = (a + rng.standard_normal(500) * np.logspace(-9, 0, 500)).astype(dtype)
    a[:4] = [np.inf, np.nan, -np.inf, 1.0]
    b[:4] = [np.inf, np.nan, np.inf, np.nan]
    expected = torch.isclose(torch.from_numpy(a), torch.from_numpy(b), rtol=1e-3, atol=1e-5).numpy()
    assert np.array_equal(close_mask(a, b, 1e-3, 1e-5), expected)


def test_rtol_multiplies_the_expected_side():
    assert allclose(np.array([1.0]), np.array([1.0015]), rtol=2e-3, atol=0)
    assert not allclose(np.array([1.0015]), np.array([1.0]), rtol=1e-3, atol=0)


def test_max_abs_difference_propagates_nan_like_torch_max():
    assert np.isnan(max_abs_difference(np.array([0.0, np.nan]), np.array([5.0, 1.0])))
    assert max_abs_difference(np.zeros((0, 3)), np.zeros((0, 3))) == 0.0


def test_worst_element_points_at_the_largest_violation():
    a = np.zeros((3, 4))
    b = np.zeros((3, 4))
    a[2, 1] = 0.5
    worst = worst_element(a, b, 1e-3, 1e-5)
    assert (worst.row, worst.column, worst.actual, worst.expected) == (2, 1, 0.5, 0.0)


def test_adjusted_atol_scales_by_sums():
    assert adjusted_atol(1e-5, (2.0,), 3.0) == pytest.approx(6e-5)
    assert adjusted_atol(1e-5, (2.0, 1.0), None) == pytest.approx(3e-5)


@pytest.mark.parametrize("layout", ["C", "F", "strided"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_blockwise_allclose_and_max_are_torchs_on_large_blocks_of_any_layout(monkeypatch, dtype, layout):
    """allclose and max_abs_difference work block by block (a cheap test, the exact mask only
    where it fails): the same verdicts and maxima as torch on blocks of every memory layout."""
    import distcheck.numerics.compare as compare

    monkeypatch.setattr(compare, "_BLOCK", 64)  # many blocks
    rng = np.random.default_rng(2)
    base = rng.standard_normal((40, 30)).astype(dtype)
    near = (base + 1e-9).astype(dtype)
    specials = [(np.inf, np.inf), (-np.inf, np.inf), (np.nan, 1.0), (1.0, np.nan), (np.inf, 1.0), (2.0, 1.0)]
    for a_value, b_value in [(None, None), *specials]:
        a, b = base.copy(), near.copy()
        if a_value is not None:
            a[37, 11], b[37, 11] = a_value, b_value
        if layout == "F":
            a, b = np.asfortranarray(a), np.asfortranarray(b)
        elif layout == "strided":
            a, b = np.repeat(a, 2, axis=1)[:, ::2], np.repeat(b, 2, axis=1)[:, ::2]
        ta, tb = torch.from_numpy(np.ascontiguousarray(a)), torch.from_numpy(np.ascontiguousarray(b))
        assert allclose(a, b, 1e-3, 1e-5) == torch.allclose(ta, tb, rtol=1e-3, atol=1e-5), (a_value, b_value)
        theirs = float((ta - tb).abs().max())
        ours = max_abs_difference(a, b)
        assert (np.isnan(ours) and np.isnan(theirs)) or ours == theirs, (a_value, b_value)


@pytest.mark.parametrize("shape", [(), (1,), (5, 3)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_one_block_comparisons_are_torchs_with_every_special_value(shape, dtype):
    """Small blocks (every comparison of a fast-mode check) take the path without slicing:
    the same verdicts and maxima as torch, 0-d arrays and mixed dtypes included."""
    specials = [(None, None), (np.inf, np.inf), (-np.inf, np.inf), (np.nan, 1.0), (1.0, np.nan), (1.0, np.inf)]
    specials.append((2.0, 1.0))
    for a_value, b_value in specials:
        a = np.full(shape, 0.5, dtype=dtype)
        b = (a + 1e-9).astype(np.complex128 if dtype == np.float32 else dtype)  # float32 vs complex128: promoted
        if a_value is not None:
            a.reshape(-1)[-1], b.reshape(-1)[-1] = a_value, b_value
        ta, tb = torch.from_numpy(np.array(a, ndmin=1)), torch.from_numpy(np.array(b, ndmin=1))
        ta = ta.to(torch.promote_types(ta.dtype, tb.dtype))
        assert allclose(a, b, 1e-3, 1e-5) == torch.allclose(ta, tb.to(ta.dtype), rtol=1e-3, atol=1e-5)
        theirs, ours = float((ta - tb).abs().max()), max_abs_difference(a, b)
        assert (np.isnan(ours) and np.isnan(theirs)) or ours == theirs, (a_value, b_value)
    with pytest.raises(ValueError, match="shapes"):
        allclose(np.zeros(2), np.zeros(3), 1e-3, 1e-5)
