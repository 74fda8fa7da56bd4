"""The numpy engine: functions on numpy arrays with hand-written VJPs."""

from __future__ import annotations

import numpy as np
import pytest

import distcheck

rng = np.random.default_rng(0)


def sin_vjp(x, g):
    return (None if g is None else g * np.cos(x),)


SIN = distcheck.numpy_function(np.sin, vjp=sin_vjp)


def matmul_vjp(a, b, g):
    if g is None:
        return None, None
    return g @ b.T, a.T @ g


MATMUL = distcheck.numpy_function(np.matmul, vjp=matmul_vjp)


def test_correct_vjps_pass():
    assert distcheck.gradcheck(SIN, (rng.standard_normal((3, 4)),))
    assert distcheck.gradcheck(MATMUL, (rng.standard_normal((3, 4)), rng.standard_normal((4, 2))))


def test_wrong_vjp_fails_with_location():
    wrong = distcheck.numpy_function(np.sin, vjp=lambda x, g: (None if g is None else 1.01 * g * np.cos(x),))
    with pytest.raises(distcheck.GradcheckError, match=r"Jacobian mismatch for output 0 with respect to input 0"):
        distcheck.gradcheck(wrong, (rng.standard_normal(4),))
    assert distcheck.gradcheck(wrong, (rng.standard_normal(4),), raise_exception=False) is False


def test_transposed_vjp_fails():
    wrong = distcheck.numpy_function(np.matmul, vjp=lambda a, b, g: (g @ b, a.T @ g))
    with pytest.raises(distcheck.GradcheckError):
        distcheck.gradcheck(
            wrong, (rng.standard_normal((3, 3)), rng.standard_normal((3, 3))), check_undefined_grad=False
        )


def test_complex_function_with_torch_convention():
    # f(z) = z²: PyTorch's convention gives grad = g · conj(2z)
    square = distcheck.numpy_function(np.square, vjp=lambda z, g: (None if g is None else g * np.conj(2 * z),))
    z = rng.standard_normal(4) + 1j * rng.standard_normal(4)
    assert distcheck.gradcheck(square, (z,))
    forgot_conj = distcheck.numpy_function(np.square, vjp=lambda z, g: (None if g is None else g * 2 * z,))
    with pytest.raises(distcheck.GradcheckError, match="imaginary part of complex outputs"):
        distcheck.gradcheck(forgot_conj, (z,))


def test_undefined_grad_outputs_must_be_accepted():
    strict = distcheck.numpy_function(np.sin, vjp=lambda x, g: (g * np.cos(x),))
    with pytest.raises(distcheck.GradcheckError, match="undefined"):
        distcheck.gradcheck(strict, (rng.standard_normal(3),))
    assert distcheck.gradcheck(strict, (rng.standard_normal(3),), check_undefined_grad=False)


def test_zero_grad_output_must_give_zero():
    leaky = distcheck.numpy_function(np.sin, vjp=lambda x, g: (None if g is None else g * np.cos(x) + (g == 0).all(),))
    with pytest.raises(distcheck.GradcheckError, match="backward not multiplied by grad_output"):
        distcheck.gradcheck(leaky, (rng.standard_normal(3),))


def test_argnums_limits_differentiable_inputs():
    scale = distcheck.numpy_function(
        lambda x, s: x * s, vjp=lambda x, s, g: (None if g is None else g * s,), argnums=(0,)
    )
    assert distcheck.gradcheck(scale, (rng.standard_normal(3), np.array(2.0)))


def test_gradgradcheck_recurses_on_the_vjp():
    # vjp(x, g) = g·cos(x) as a function of (x, g), with its own vjp
    def vjp_of_vjp(x, g, gg):
        if gg is None:
            return None, None
        return -gg * g * np.sin(x), gg * np.cos(x)

    vjp = distcheck.numpy_function(lambda x, g: g * np.cos(x), vjp=vjp_of_vjp)
    sin = distcheck.numpy_function(np.sin, vjp=vjp)
    assert distcheck.gradgradcheck(sin, (rng.standard_normal(3),))
    wrong = distcheck.numpy_function(
        lambda x, g: g * np.cos(x), vjp=lambda x, g, gg: (gg * g * np.sin(x), gg * np.cos(x))
    )
    with pytest.raises(distcheck.GradcheckError):
        distcheck.gradgradcheck(
            distcheck.numpy_function(np.sin, vjp=wrong), (rng.standard_normal(3),), check_undefined_grad=False
        )


def test_gradgradcheck_needs_a_differentiable_vjp():
    with pytest.raises(NotImplementedError, match="vjp to be a distcheck.numpy_function"):
        distcheck.gradgradcheck(SIN, (rng.standard_normal(3),))


def test_plain_function_with_numpy_inputs_is_a_clear_error():
    with pytest.raises(TypeError, match="numpy_function"):
        distcheck.gradcheck(np.sin, (rng.standard_normal(3),))


def test_vjp_returning_wrong_count_is_reported():
    bad = distcheck.numpy_function(np.matmul, vjp=lambda a, b, g: (g @ b.T,))
    with pytest.raises(distcheck.GradcheckError, match="expected one per differentiable input"):
        distcheck.gradcheck(bad, (rng.standard_normal((2, 2)), rng.standard_normal((2, 2))))


def test_vjp_returning_wrong_shape_is_reported():
    bad = distcheck.numpy_function(np.sin, vjp=lambda x, g: (None if g is None else (g * np.cos(x))[:-1],))
    with pytest.raises(distcheck.GradcheckError, match="incorrect size"):
        distcheck.gradcheck(bad, (rng.standard_normal(3),))


def test_input_arrays_are_left_unchanged():
    x = rng.standard_normal(5)
    before = x.copy()
    distcheck.gradcheck(SIN, (x,))
    assert np.array_equal(x, before)


SIN_FWD = distcheck.numpy_function(
    np.sin,
    vjp=lambda x, g: (None if g is None else g * np.cos(x),),
    jvp=lambda x, t: (None if t is None else t * np.cos(x),),
)


@pytest.mark.parametrize(
    "options", [{"fast_mode": True}, {"check_forward_ad": True}, {"check_forward_ad": True, "fast_mode": True}]
)
def test_fast_and_forward_modes(options):
    assert distcheck.gradcheck(SIN_FWD, (rng.standard_normal((4, 5)),), **options)
    wrong_jvp = distcheck.numpy_function(
        np.sin, vjp=SIN_FWD.vjp, jvp=lambda x, t: (None if t is None else 1.1 * t * np.cos(x),)
    )
    wrong_vjp = distcheck.numpy_function(
        np.sin, vjp=lambda x, g: (None if g is None else 1.1 * g * np.cos(x),), jvp=SIN_FWD.jvp
    )
    forward = options.get("check_forward_ad", False)
    assert distcheck.gradcheck(wrong_jvp, (rng.standard_normal(5),), raise_exception=False, **options) is not forward
    assert distcheck.gradcheck(wrong_vjp, (rng.standard_normal(5),), raise_exception=False, **options) is False


def test_forward_mode_with_complex_inputs():
    square = distcheck.numpy_function(
        np.square,
        vjp=lambda z, g: (None if g is None else g * np.conj(2 * z),),
        jvp=lambda z, t: (None if t is None else 2 * z * t,),
    )
    z = rng.standard_normal(4) + 1j * rng.standard_normal(4)
    assert distcheck.gradcheck(square, (z,), check_forward_ad=True)
    assert distcheck.gradcheck(square, (z,), check_forward_ad=True, fast_mode=True)


def test_fast_mode_evaluates_a_large_input_a_handful_of_times():
    calls = []

    def counted_sin(x):
        calls.append(1)
        return np.sin(x)

    sin = distcheck.numpy_function(counted_sin, vjp=SIN_FWD.vjp)
    assert distcheck.gradcheck(sin, (rng.standard_normal(50_000),), fast_mode=True)
    assert len(calls) <= 10  # slow mode would evaluate it 100,000 times


def test_forward_mode_needs_a_jvp():
    with pytest.raises(NotImplementedError, match="jvp"):
        distcheck.gradcheck(SIN, (rng.standard_normal(3),), check_forward_ad=True)


def test_batched_checks_name_the_missing_capability():
    with pytest.raises(NotImplementedError, match="vmap"):
        distcheck.gradcheck(SIN, (rng.standard_normal(3),), check_batched_grad=True)
