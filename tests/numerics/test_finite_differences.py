import numpy as np
import pytest

from distcheck.numerics.finite_differences import PerturbationChangedOutput, jacobian_columns


def _evaluator(f, x):
    def evaluate(k, delta):
        y = x.copy()
        y.reshape(-1)[k] += delta
        return [f(y)]

    return evaluate


def test_columns_of_a_linear_map_are_its_matrix_transposed():
    a = np.arange(6.0).reshape(2, 3)
    x = np.ones(3)
    (block,) = jacobian_columns(_evaluator(lambda v: a @ v, x), range(3), 1e-6, False, [2], [np.dtype(float)])
    np.testing.assert_allclose(block, a.T, atol=1e-8)


def test_complex_input_gives_conjugate_wirtinger_columns():
    # |z|² has d/dx + i d/dy = 2x + 2iy = 2z
    z = np.array([1.0 + 2.0j, -0.5 + 0.25j])
    (block,) = jacobian_columns(_evaluator(lambda v: np.abs(v) ** 2, z), range(2), 1e-6, True, [2], [np.dtype(complex)])
    np.testing.assert_allclose(np.diag(block), 2 * z, atol=1e-6)


def test_a_range_of_columns():
    a = np.arange(12.0).reshape(3, 4)
    (block,) = jacobian_columns(
        _evaluator(lambda v: a @ v, np.ones(4)), range(1, 3), 1e-6, False, [3], [np.dtype(float)]
    )
    np.testing.assert_allclose(block, a.T[1:3], atol=1e-8)


def test_output_shape_change_is_reported_with_the_index():
    def evaluate(k, delta):
        return [np.zeros(2 if delta > 0 else 1)]

    with pytest.raises(PerturbationChangedOutput, match="same shape"):
        jacobian_columns(evaluate, [0], 1e-6, False, [1], [np.dtype(float)], lambda k: f"on index ({k},) ")
