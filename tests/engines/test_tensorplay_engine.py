"""The tensorplay engine.

1. Parity: every case is built twice from the same numpy values, as a tensorplay function and as
   its torch twin. distcheck's verdict on the tensorplay function must equal torch.autograd's on
   the twin (pass, or the exception and the kind of failure), except where tensorplay's own
   autodiff is wrong: there the expected distcheck verdict is written down, with the reason.
2. Fast mode, batched gradients and forward AD through distcheck.gradcheck (skipped while the
   planner does not run them).
3. tensorplay's own gradcheck against distcheck on the cases it gets wrong.
4. The engine's methods called directly.
"""

from __future__ import annotations

import importlib
import pickle
import warnings

import numpy as np
import pytest

tp = pytest.importorskip("tensorplay")
torch = pytest.importorskip("torch")

pytest.importorskip("tensorplay.nn.functional")  # lib.nn.functional in the cases

import distcheck  # noqa: E402
from distcheck.engines import checks, complex_parts, get_engine  # noqa: E402
from distcheck.engines.derivatives import column_jvp, row_vjp  # noqa: E402
from distcheck.engines.tensorplay_engine import ComplexOutputPart, GradOfOutputs  # noqa: E402
from distcheck.errors import EngineCapabilityError  # noqa: E402
from tests.catalogue import tensorplay_functions as tpf  # noqa: E402
from tests.catalogue.twins import SHARED_CORRECT, SHARED_GRADGRAD, SHARED_WRONG, TwinCase, custom, maker, values  # noqa: E402
from tests.catalogue.twins import run_twin as run_either  # noqa: E402
from tests.parity.runner import Outcome  # noqa: E402

TpGradcheckError = importlib.import_module("tensorplay.autograd.gradcheck").GradcheckError
engine = get_engine("tensorplay")


def _f(name):
    return lambda lib: getattr(lib.nn.functional, name)


NO_UNDEFINED = {"check_undefined_grad": False}

CORRECT = [
    *SHARED_CORRECT,
    TwinCase("exp_mul_broadcast", lambda lib, t: (lambda x, y: x.exp() * y, (t(3, 4), t(4, seed=1)))),
    TwinCase("mul", lambda lib, t: (lambda x, y: x * y, (t(3), t(3, seed=1)))),
    # tensorplay's matmul/sum(dim)/mean(dim)/conv2d/linear backward cannot take undefined grads
    # (see DEFECTS): unchecked here, their Jacobians are right
    TwinCase("matmul", lambda lib, t: (lib.matmul, (t(3, 4), t(4, 2, seed=1))), options=NO_UNDEFINED),
    TwinCase("sum_dim1", lambda lib, t: (lambda x: x.sum(1), (t(3, 4),)), options=NO_UNDEFINED),
    TwinCase("mean_dim0", lambda lib, t: (lambda x: x.mean(0), (t(3, 4),)), options=NO_UNDEFINED),
    TwinCase(
        "conv2d",
        lambda lib, t: (_f("conv2d")(lib), (t(1, 2, 5, 5), t(3, 2, 3, 3, seed=1), t(3, seed=2))),
        options=NO_UNDEFINED,
    ),
    TwinCase(
        "linear", lambda lib, t: (_f("linear")(lib), (t(4, 3), t(2, 3, seed=1), t(2, seed=2))), options=NO_UNDEFINED
    ),
    TwinCase("softmax", lambda lib, t: (lambda x: x.softmax(-1), (t(3, 4),))),
    TwinCase("log_softmax", lambda lib, t: (lambda x: _f("log_softmax")(lib)(x, dim=0), (t(3, 4),))),
    TwinCase("cumsum", lambda lib, t: (lambda x: x.cumsum(0), (t(5),))),
    TwinCase("sort_values_and_indices", lambda lib, t: (lambda x: lib.sort(x, dim=1), (t(3, 4),))),
    TwinCase("max_dim", lambda lib, t: (lambda x: lib.max(x, dim=0), (t(3, 4),))),
    TwinCase("non_contiguous_input", lambda lib, t: (lambda x: x.exp(), (t(4, 3, transposed=True),))),
    TwinCase("input_without_grad", lambda lib, t: (lambda x, n: x * n, (t(3), t(3, seed=1, requires_grad=False)))),
    TwinCase("no_differentiable_output", lambda lib, t: (lambda x: (x > 0).double(), (t(4),))),
    TwinCase("complex_two_outputs", lambda lib, t: (lambda z: (z * z, z * 3), (t(3, dtype="complex128"),))),
    TwinCase("real_to_complex", lambda lib, t: (lambda x: lib.complex(x, x * x), (t(4),))),
    TwinCase("real_to_complex_fft", lambda lib, t: (lib.fft.fft, (t(5),)), options=NO_UNDEFINED),
    TwinCase(
        "undefined_grad_unchecked", lambda lib, t: (custom(lib, "NoUndefinedGrad"), (t(3),)), options=NO_UNDEFINED
    ),
]

WRONG = [
    *SHARED_WRONG,
    TwinCase(
        "undefined_grad_raises", lambda lib, t: (custom(lib, "NoUndefinedGrad"), (t(3),)), torch_says="GradcheckError"
    ),
    TwinCase("numerical_not_zero", lambda lib, t: (lambda x: x.detach() * 2, (t(3),)), torch_says="GradcheckError"),
    TwinCase("no_input_requires_grad", lambda lib, t: (lib.sin, (t(3, requires_grad=False),)), torch_says="ValueError"),
    TwinCase(
        "expanded_input",
        lambda lib, t: (lambda x: x * 2, (t(1, requires_grad=False).expand(3).requires_grad_(),)),
        torch_says="RuntimeError",
    ),
]

GRADGRAD = [
    *SHARED_GRADGRAD,
    TwinCase(
        "gg_matmul", lambda lib, t: (lib.matmul, (t(3, 4), t(4, 2, seed=1))), kind="gradgrad", options=NO_UNDEFINED
    ),
    TwinCase("gg_softmax", lambda lib, t: (lambda x: x.softmax(0), (t(4),)), kind="gradgrad"),
]

UNDEFINED = (
    "GradcheckError",
    'Expected backward function to handle undefined output grads. Please look at "Notes about undefined output '
    'gradients" in "tools/autograd/derivatives.yaml"',
)
INCORRECT_TYPE = ("GradcheckError", "grad is incorrect type")
NO_DOUBLE_BACKWARD = ("GradcheckError", "Numerical gradient for function expected to be zero")

# torch passes these; tensorplay's autodiff is wrong, and distcheck says how
DEFECTS = [
    # its reduction / matmul / select / view_as_real nodes fill an undefined grad with zeros
    # shaped like the node's input instead of its output, and then fail
    TwinCase("undefined_grad_matmul", lambda lib, t: (lib.matmul, (t(3, 4), t(4, 2, seed=1))), differs=UNDEFINED),
    TwinCase("undefined_grad_sum_dim1", lambda lib, t: (lambda x: x.sum(1), (t(3, 4),)), differs=UNDEFINED),
    TwinCase("undefined_grad_mean_dim0", lambda lib, t: (lambda x: x.mean(0), (t(3, 4),)), differs=UNDEFINED),
    TwinCase("undefined_grad_select", lambda lib, t: (lambda x: x[0], (t(2, 3),)), differs=UNDEFINED),
    TwinCase(
        "undefined_grad_view_as_real",
        lambda lib, t: (lib.view_as_real, (t(3, dtype="complex128"),)),
        differs=UNDEFINED,
    ),
    TwinCase(
        "undefined_grad_gg_matmul",
        lambda lib, t: (lib.matmul, (t(3, 4), t(4, 2, seed=1))),
        kind="gradgrad",
        differs=UNDEFINED,
    ),
    # the gradient of a real input reaches it complex: mul by a complex scalar and complex + real
    # do not take the real part, so a real leaf would get a complex .grad (the values are right)
    TwinCase("real_to_complex_scalar_mul", lambda lib, t: (lambda x: x * (1 + 2j), (t(4),)), differs=INCORRECT_TYPE),
    TwinCase(
        "complex_plus_real",
        lambda lib, t: (lambda z, x: z + x, (t(3, dtype="complex128"), t(3, seed=1))),
        differs=INCORRECT_TYPE,
    ),
    # complex unary ops read a non-contiguous complex input as if it were contiguous: the forward
    # values are wrong, so they disagree with the backward
    TwinCase(
        "complex_sin_non_contiguous_input",
        lambda lib, t: (lib.sin, (t(3, 2, dtype="complex128", transposed=True),)),
        differs=(
            "GradcheckError",
            "While considering the imaginary part of complex outputs only, Jacobian mismatch for output 0 "
            "with respect to input 0,",
        ),
    ),
    # no double backward: gradients built with create_graph=True do not require grad
    TwinCase("gg_tanh", lambda lib, t: (lib.tanh, (t(3),)), kind="gradgrad", differs=NO_DOUBLE_BACKWARD),
    TwinCase(
        "gg_conv2d",
        lambda lib, t: (_f("conv2d")(lib), (t(1, 1, 4, 4), t(2, 1, 2, 2, seed=1))),
        kind="gradgrad",
        options=NO_UNDEFINED,
        differs=NO_DOUBLE_BACKWARD,
    ),
]

ALL = CORRECT + WRONG + GRADGRAD + DEFECTS


def run_twin(case: TwinCase, lib, **extra) -> Outcome:
    tp.manual_seed(0)  # gradgradcheck's random grad-outputs come from tensorplay's global RNG
    return run_either(case, lib, **extra)


@pytest.mark.parametrize("case", ALL, ids=str)
def test_same_verdict_as_torch_on_the_twin(case):
    reference = run_twin(case, torch)
    ours = run_twin(case, tp)
    assert reference.verdict == case.torch_says, f"torch's verdict changed: {reference}"
    if case.differs is None:
        assert ours.comparable() == reference.comparable(), f"\ntorch:      {reference}\ndistcheck: {ours}"
    else:
        assert (ours.verdict, ours.kind) == case.differs, f"\ndistcheck: {ours}"


@pytest.mark.parametrize("case", [c for c in ALL if c.torch_says == "GradcheckError" or c.differs], ids=str)
def test_raise_exception_false_returns_false(case):
    assert run_twin(case, tp, raise_exception=False).verdict == "returned False"


def test_errors_are_both_libraries_gradcheck_errors():
    with pytest.raises(TpGradcheckError) as caught:
        distcheck.gradcheck(tpf.WrongScale.apply, (maker(tp)(3),))
    assert isinstance(caught.value, distcheck.GradcheckError)
    assert isinstance(caught.value, RuntimeError)


def test_undefined_grad_defect_message_names_the_case_and_the_cause():
    t = maker(tp)
    with pytest.raises(distcheck.GradcheckError) as caught:
        distcheck.gradcheck(tp.matmul, (t(3, 4), t(4, 2, seed=1)))
    message = str(caught.value)
    assert "With all output grads undefined" in message
    assert "tensorplay's backward raised RuntimeError: mat1 and mat2 shapes cannot be multiplied" in message


class _TwoOutputs(tp.autograd.Function):
    """(x * 2, x * 3) whose backward handles all grads undefined, but not one of them."""

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g1, g2):
        if g1 is None and g2 is None:
            return None
        return g1 * 2 + g2 * 3


def test_undefined_grad_one_output_at_a_time():
    with pytest.raises(
        distcheck.GradcheckError, match="With the grad of output 0 undefined, tensorplay's backward raised"
    ):
        checks.check_undefined_grad(engine, _TwoOutputs.apply, (maker(tp)(3),))


class _LeakyUndefinedGrad(tp.autograd.Function):
    """x * 2 whose backward turns an undefined grad-output into ones."""

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return tp.ones_like(x) if g is None else g * 2


def test_nonzero_grad_for_undefined_grads_is_reported():
    with pytest.raises(distcheck.GradcheckError, match="differentiable input 0 a nonzero gradient"):
        checks.check_undefined_grad(engine, _LeakyUndefinedGrad.apply, (maker(tp)(3),))


def test_missing_double_backward_is_explained():
    with pytest.warns(UserWarning, match="has no double backward in tensorplay"):
        assert not distcheck.gradgradcheck(tp.tanh, (maker(tp)(3),), raise_exception=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert distcheck.gradgradcheck(tp.sin, (maker(tp)(3),))
        # a linear function with constant grad-outputs has constant gradients: no warning
        assert distcheck.gradgradcheck(lambda x: x * 3, (maker(tp)(3),), (maker(tp)(3, requires_grad=False),))


# ---------------------------------------------------------------------------------------------
# Fast mode, batched gradients and forward AD through distcheck.gradcheck (skipped until the
# planner runs them; the engine methods they use are tested directly below)


def _wired(**flag) -> bool:
    try:
        distcheck.gradcheck(tp.sin, (maker(tp)(2),), **flag)
    except NotImplementedError as e:
        return "distcheck does not implement" not in str(e)
    return True


def _by_name(*names: str) -> list[TwinCase]:
    return [c for c in ALL if c.name in names]


FAST = _by_name(
    "sin",
    "exp_mul_broadcast",
    "matmul",
    "complex_mul_many_elements",
    "complex_sin_many_elements",
    "real_to_complex",
    "real_and_complex_inputs_custom",
    "complex_to_real_abs",
    "wrong_scale",
    "one_wrong_element",
    "transposed",
    "missing_conjugate",
    "wrong_real_to_complex",
    "wrong_imaginary_part",
    "wrong_real_input_of_complex",
    "zero_grad_not_zero",
    "gg_sin",
    "gg_complex",
    "gg_wrong_second_order",
)


@pytest.mark.parametrize("case", FAST, ids=str)
def test_fast_mode_same_verdict_as_torch(case):
    if not _wired(fast_mode=True):
        pytest.skip("fast mode is not wired into distcheck.gradcheck yet")
    reference = run_twin(case, torch, fast_mode=True)
    ours = run_twin(case, tp, fast_mode=True)
    assert reference.verdict == case.torch_says, f"torch's verdict changed: {reference}"
    assert ours.comparable() == reference.comparable(), f"\ntorch:      {reference}\ndistcheck: {ours}"


BATCHED_FAILS = ("GradcheckError", "While computing batched gradients, got")


@pytest.mark.parametrize(
    "case, tensorplay_verdict",
    [(c, None) for c in _by_name("sin", "matmul", "softmax", "complex_mul_many_elements")]
    # tensorplay has no batching rule for the backward of sum(dim) (_sum_dim_backward) or tanh
    # (tanh_backward), nor for conj, which sin's double backward uses (torch has them all)
    + [(c, BATCHED_FAILS) for c in _by_name("sum_dim1", "check_grad_dtypes_ok", "gg_sin")],
    ids=str,
)
def test_batched_grad_verdicts(case, tensorplay_verdict):
    if not _wired(check_batched_grad=True):
        pytest.skip("batched gradient checks are not wired into distcheck.gradcheck yet")
    reference = run_twin(case, torch, check_batched_grad=True)
    ours = run_twin(case, tp, check_batched_grad=True)
    assert reference.verdict == "pass", f"torch's verdict changed: {reference}"
    expected = reference.comparable()[:2] if tensorplay_verdict is None else tensorplay_verdict
    assert (ours.verdict, ours.kind) == expected, f"\ndistcheck: {ours}"


@pytest.mark.parametrize("flag", ["check_forward_ad", "check_batched_forward_grad"])
def test_forward_ad_checks_raise_the_capability_error(flag):
    with pytest.raises(NotImplementedError) as caught:  # complex input: its real and imaginary parts are split
        distcheck.gradcheck(tp.sin, (maker(tp)(3, dtype="complex128"),), **{"check_forward_ad": True, flag: True})
    if "distcheck does not implement" in str(caught.value):
        pytest.skip("forward-mode checks are not wired into distcheck.gradcheck yet")
    assert isinstance(caught.value, EngineCapabilityError)
    assert "no forward-mode AD" in str(caught.value)


# ---------------------------------------------------------------------------------------------
# tensorplay's own gradcheck against distcheck


def own_gradcheck(func, inputs) -> bool:
    return tp.autograd.gradcheck(func, inputs, raise_exception=False)


@pytest.mark.parametrize(
    "func, shape",
    [(lambda z: z * z, (6,)), (tp.sin, (2, 3))],
    ids=["z*z", "sin(z)"],
)
def test_own_gradcheck_fails_correct_complex_functions_distcheck_passes(func, shape):
    z = maker(tp)(*shape, dtype="complex128")
    assert not own_gradcheck(func, (z,))  # its complex path mis-orders the Jacobian's rows
    assert distcheck.gradcheck(func, (z,))


@pytest.mark.parametrize(
    "name, build",
    [
        ("wrong_real_to_complex", lambda t: (tpf.WrongRealToComplex.apply, (t(3),))),
        (
            "wrong_real_input_of_complex",
            lambda t: (tpf.WrongRealInputOfComplex.apply, (t(1, dtype="complex128"), t(1))),
        ),
        ("complex_nondet_backward", lambda t: (tpf.NoisyComplexBackward.apply, (t(1, dtype="complex128"),))),
        ("complex_zero_grad_not_zero", lambda t: (tpf.ComplexIgnoresZeroGrad.apply, (t(1, dtype="complex128"),))),
    ],
)
def test_own_gradcheck_passes_wrong_complex_functions_distcheck_fails(name, build):
    # one-element outputs, where tensorplay's complex path orders its rows right (see above): it
    # checks no real input, and skips the reentrancy and zero-grad checks
    func, inputs = build(maker(tp))
    assert own_gradcheck(func, inputs)
    assert not distcheck.gradcheck(func, inputs, raise_exception=False, atol=1e-2 if "nondet" in name else 1e-5)


def test_own_gradgradcheck_cannot_check_complex_outputs_distcheck_can():
    z = maker(tp)(3, dtype="complex128")
    with pytest.raises(RuntimeError, match="same dtype category"):  # it makes float64 grad-outputs
        tp.autograd.gradgradcheck(lambda z: z * z, (z,))
    assert distcheck.gradgradcheck(lambda z: z * z, (z,))


# ---------------------------------------------------------------------------------------------
# Engine methods


def leaf(a, requires_grad=True):
    return tp.tensor(np.array(a, copy=True)).requires_grad_(requires_grad)


def test_info():
    x = leaf(values(2, 3))
    info = engine.info(x)
    assert (info.shape, info.dtype, info.dtype_name) == ((2, 3), np.dtype(np.float64), "tensorplay.float64")
    assert info.is_floating and info.is_double and info.requires_grad and not info.is_complex
    assert not info.overlapping
    z = engine.info(leaf(values(3, dtype="complex128")))
    assert z.is_complex and not z.is_floating and z.is_double and z.dtype == np.complex128
    assert not engine.info(tp.zeros((2,), dtype=tp.float32)).is_double
    assert engine.info(tp.zeros((1,), dtype=tp.float64).expand(3)).overlapping
    assert engine.is_tensor(x) and not engine.is_tensor(np.zeros(2)) and not engine.is_tensor(torch.zeros(2))


def test_expanded_input_is_rejected():
    with pytest.raises(RuntimeError, match="stride 0"):
        distcheck.gradcheck(lambda x: x * 2, (tp.zeros((1,), dtype=tp.float64).expand(3).requires_grad_(),))


def test_sparse_inputs_are_a_capability_error():
    dense = leaf(values(2, 2))
    assert engine.element_rows(dense) is None and engine.densify((dense, 3)) is None
    sparse = tp.sparse_coo_tensor(tp.tensor(np.array([[0, 1], [1, 0]])), tp.tensor(np.array([1.0, 2.0])), (2, 2))
    assert not engine.info(sparse).overlapping  # its strides are (0, 0)
    with pytest.raises(EngineCapabilityError, match="does not check sparse tensorplay inputs"):
        engine.densify((dense, sparse))
    with pytest.raises(EngineCapabilityError, match="does not check sparse tensorplay inputs"):
        engine.element_rows(sparse)


@pytest.mark.parametrize("part", ["real", "imag"])
def test_input_part_is_differentiable_with_torchs_gradients(part):
    c, r = values(3, dtype="complex128"), values(3, seed=1)
    func, parts = complex_parts.input_part(engine, lambda z, x: z * z * x, (leaf(c), leaf(r)), part)
    assert parts[0].dtype == tp.float64 and parts[0].requires_grad and parts[1].requires_grad
    np.testing.assert_array_equal(parts[0].detach().numpy(), getattr(c, part))
    (out,) = func(*parts)
    np.testing.assert_allclose(out.detach().numpy(), c * c * r, rtol=1e-15)
    g = values(3, dtype="complex128", seed=2)
    grads = tp.autograd.grad([out], list(parts), [tp.tensor(g.copy())])
    xt, yt, rt = (torch.tensor(a, requires_grad=True) for a in (c.real, c.imag, r))
    zt = torch.complex(xt, yt)
    expected = torch.autograd.grad(zt * zt * rt, [xt if part == "real" else yt, rt], torch.tensor(g))
    for ours, reference in zip(grads, expected):
        np.testing.assert_allclose(ours.detach().numpy(), reference.numpy(), rtol=1e-14)


def test_perturbed_evaluator_real_restores_the_input_without_bumping_its_version():
    a = values(2, 3)
    x = leaf(a)
    evaluate = engine.perturbed_evaluator(lambda x: (x * 1, x.sum()), (x,), 0, [True, True])
    out, total = evaluate(4, 0.5)
    expected = a.copy()
    expected[1, 1] += 0.5
    np.testing.assert_array_equal(out, expected)
    assert total == pytest.approx(expected.sum())
    np.testing.assert_array_equal(x.detach().numpy(), a)
    assert x._version == 0 and x.is_leaf


def test_perturbed_evaluator_copies_outputs_that_view_the_input():
    a = values(4)
    x = leaf(a)
    (out,) = engine.perturbed_evaluator(lambda x: x, (x,), 0, [True])(2, 1.0)
    assert out[2] == a[2] + 1.0  # copied before the input was restored
    assert x.detach().numpy()[2] == a[2]


def test_perturbed_evaluator_complex_and_unwanted_outputs():
    a = values(3, dtype="complex128")
    z = leaf(a)
    out, skipped = engine.perturbed_evaluator(lambda z: (z * 2, z * 3), (z,), 0, [True, False])(1, 1e-3j)
    assert skipped is None
    expected = a * 2
    expected[1] = (a[1] + 1e-3j) * 2
    np.testing.assert_allclose(out, expected)
    np.testing.assert_array_equal(z.detach().numpy(), a)


def test_perturbed_evaluator_zero_dim_and_non_contiguous():
    s = leaf(np.array(2.0))
    (out,) = engine.perturbed_evaluator(lambda s: s * s, (s,), 0, [True])(0, 1.0)
    assert out == 9.0 and s.item() == 2.0
    a = values(3, 2)
    x = tp.tensor(a.copy()).t().requires_grad_()  # shape (2, 3), strides (1, 2)
    (out,) = engine.perturbed_evaluator(lambda x: x * 1, (x,), 0, [True])(1, 1.0)  # element (0, 1)
    expected = a.T.copy()
    expected[0, 1] += 1
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(x.detach().numpy(), a.T)


def test_direction_evaluator_real_and_complex():
    a = values(2, 3)
    x = leaf(a)
    delta = values(2, 3, seed=5) * 1e-3
    (out,) = engine.direction_evaluator(lambda x: x.sin(), (x,), 0, [True])(delta)
    np.testing.assert_allclose(out, np.sin(a + delta), rtol=1e-14)
    np.testing.assert_array_equal(x.detach().numpy(), a)
    c = values(3, dtype="complex128")
    z = leaf(c)
    step = 1e-3j * values(3, seed=6)
    (out,) = engine.direction_evaluator(lambda z: z * z, (z,), 0, [True])(step)
    np.testing.assert_allclose(out, (c + step) ** 2, rtol=1e-14)
    np.testing.assert_array_equal(z.detach().numpy(), c)
    with pytest.raises(ValueError, match="complex direction for a real input"):
        engine.direction_evaluator(lambda x: x, (x,), 0, [True])(step[:1] * np.ones((2, 3)))


def test_vjp_with_an_index_and_with_an_array():
    x, w = leaf(values(3, 4)), leaf(values(4, 2, seed=1))
    vjp = row_vjp(engine, tp.matmul, (x, w), 0, [0, 1])
    gx, gw = vjp(5)  # one-hot at output element (2, 1)
    one_hot = np.zeros((3, 2))
    one_hot[2, 1] = 1
    np.testing.assert_allclose(gx, one_hot @ values(4, 2, seed=1).T)
    np.testing.assert_allclose(gw, values(3, 4).T @ one_hot)
    g = values(3, 2, seed=3)
    gx2, gw2 = vjp(g)  # the graph is kept between calls
    np.testing.assert_allclose(gx2, g @ values(4, 2, seed=1).T)
    np.testing.assert_allclose(gw2, values(3, 4).T @ g)
    assert vjp(5)[0].tolist() == gx.tolist()


def test_vjp_unused_input_and_complex_output():
    x, y = leaf(values(3)), leaf(values(2, seed=1))
    assert row_vjp(engine, lambda x, y: x * 2, (x, y), 0, [0, 1])(0)[1] is None
    c = values(3, dtype="complex128")
    (gz,) = row_vjp(engine, lambda z: z * z, (leaf(c),), 0, [0])(np.array([1j, 0, 0]))
    np.testing.assert_allclose(gz, [1j * np.conj(2 * c[0]), 0, 0])


def test_random_unit_vectors_are_deterministic_and_leave_global_rngs_alone():
    np_state = np.random.get_state()[1].copy()
    tp.manual_seed(11)
    expected_tp = tp.rand((3,), dtype=tp.float64).numpy().copy()
    tp.manual_seed(11)
    dtypes = [np.dtype(np.float64), np.dtype(np.float32), np.dtype(np.complex128)]
    first = engine.random_unit_vectors([5, 3, 4], dtypes)
    second = engine.random_unit_vectors([5, 3, 4], dtypes)
    assert np.array_equal(tp.rand((3,), dtype=tp.float64).numpy(), expected_tp)
    assert np.array_equal(np.random.get_state()[1], np_state)
    for a, b, dtype, n in zip(first, second, dtypes, [5, 3, 4]):
        assert a.dtype == dtype and a.shape == (n,)
        np.testing.assert_array_equal(a, b)
        assert np.linalg.norm(a) == pytest.approx(1, rel=1e-6)
        assert np.all(a.real >= 0) and np.all(a.imag == 0)  # like torch: real values, also for complex
    assert not np.allclose(first[0][:3], first[1])  # drawn in order from one generator


def test_random_normal_comes_from_tensorplays_global_rng():
    shapes, dtypes = [(2, 3), (4,)], [np.dtype(np.float64), np.dtype(np.complex128)]
    tp.manual_seed(3)
    a = engine.random_normal(shapes, dtypes)
    tp.manual_seed(3)
    b = engine.random_normal(shapes, dtypes)
    for x, y, shape, dtype in zip(a, b, shapes, dtypes):
        np.testing.assert_array_equal(x, y)
        assert x.shape == shape and x.dtype == dtype
    assert np.any(a[1].imag != 0)
    big = engine.random_normal([(20000,)], [np.dtype(np.float64)])[0]
    assert abs(big.mean()) < 0.05 and abs(big.std() - 1) < 0.05


def batched(func, inputs, output=0):
    outputs = engine.call(func, inputs)
    o = outputs[output]
    dtype = np.dtype(np.complex128 if o.is_complex() else np.float64)
    tp.manual_seed(0)
    checks.check_batched_grad(engine, func, inputs, output, engine.random_normal([tuple(o.shape)] * 2, [dtype] * 2))


@pytest.mark.parametrize(
    "func, shapes",
    [
        (tp.sin, [(3, 4)]),
        (tp.matmul, [(3, 4), (4, 2)]),
        (lambda x, y: x * 2, [(3,), (2,)]),  # unused input: zeros
        (lambda x: x.softmax(-1), [(3, 4)]),
        (tpf.WrongScale.apply, [(3,)]),  # batched equals separate, even when both are wrong
    ],
    ids=["sin", "matmul", "unused_input", "softmax", "custom_function"],
)
def test_check_batched_grad_passes(func, shapes):
    batched(func, tuple(leaf(values(*s, seed=i)) for i, s in enumerate(shapes)))


def test_check_batched_grad_complex_output():
    batched(lambda z: z * z, (leaf(values(5, dtype="complex128")),))


@pytest.mark.parametrize(
    "func, kernel", [(lambda x: x.sum(1), "_sum_dim_backward"), (tp.tanh, "tanh_backward")], ids=["sum_dim1", "tanh"]
)
def test_check_batched_grad_reports_a_missing_batching_rule(func, kernel):
    with pytest.raises(distcheck.GradcheckError) as caught:
        batched(func, (leaf(values(3, 4)),))
    message = str(caught.value)
    assert message.startswith(
        f"While computing batched gradients, got: NotImplementedError: Kernel not found for op: {kernel}"
    )
    assert f"tensorplay has no batching rule for {kernel}" in message
    assert "check_batched_grad=False" in message


def test_check_batched_grad_reports_a_mismatch():
    with pytest.raises(distcheck.GradcheckError) as caught:
        batched(tpf.VeryNoisyBackward.apply, (leaf(values(3)),))
    message = str(caught.value)
    assert message.startswith("For output 0 and input 0:")
    assert "Got:\ntensor([[" in message and "Expected:\ntensor([[" in message


@pytest.mark.parametrize(
    "call",
    [
        lambda x: column_jvp(engine, tp.sin, (x,), [0]),
        lambda x: checks.check_undefined_forward_grad(engine, tp.sin, (x,), [np.ones(3)]),
        lambda x: checks.check_batched_forward_grad(engine, tp.sin, (x,), 0, [np.ones(3)] * 2),
    ],
    ids=["jvp", "undefined_forward_grad", "batched_forward_grad"],
)
def test_forward_ad_is_a_capability_error_that_names_what_is_missing(call):
    with pytest.raises(EngineCapabilityError) as caught:
        call(leaf(values(3)))
    assert isinstance(caught.value, NotImplementedError)
    message = str(caught.value)
    assert f"tensorplay {tp.__version__} has no forward-mode AD" in message
    assert "tensorplay.func.jvp is computed from the reverse-mode graph" in message
    assert "=False for tensorplay functions" in message


def test_check_zero_grad_output():
    checks.check_zero_grad_output(engine, tp.sin, (leaf(values(3)),), masked=False)
    with pytest.raises(distcheck.GradcheckError, match="backward not multiplied by grad_output"):
        checks.check_zero_grad_output(engine, tpf.IgnoresZeroGrad.apply, (leaf(values(3)),), masked=False)
    with pytest.raises(distcheck.GradcheckError, match="no Tensors requiring grad"):
        checks.check_zero_grad_output(engine, tp.sin, (leaf(values(3), requires_grad=False),), masked=False)


def test_real_input_with_a_complex_gradient_is_reported_clearly():
    with pytest.raises(distcheck.GradcheckError) as caught:
        distcheck.gradcheck(lambda x: x * (1 + 2j), (leaf(values(3)),))
    assert "did not reduce the complex gradient of a real input to its real part" in str(caught.value)


@pytest.mark.parametrize("part, take", [("real", np.real), ("imag", np.imag)])
def test_output_part_is_differentiable_with_torchs_gradients(part, take):
    c, r = values(3, dtype="complex128"), values(3, seed=1)
    z, x = leaf(c), leaf(r)
    assert not (z * 1).real.requires_grad  # why view_as_real is used: .real is not differentiable
    func = complex_parts.output_part(engine, lambda z, x: z * z * x, part, 2)
    (out,) = func(z, x)
    np.testing.assert_allclose(out.detach().numpy(), take(c * c * r))
    g = values(3, seed=2)
    grads = tp.autograd.grad([out], [z, x], [tp.tensor(g.copy())])
    zt, xt = torch.tensor(c, requires_grad=True), torch.tensor(r, requires_grad=True)
    expected = torch.autograd.grad(getattr(torch, part)(zt * zt * xt), [zt, xt], torch.tensor(g))
    for ours, reference in zip(grads, expected):
        np.testing.assert_allclose(ours.detach().numpy(), reference.numpy(), rtol=1e-14)


def test_derived_functions_pickle():
    func = ComplexOutputPart(tpf.WrongScale.apply, "imag")
    assert pickle.loads(pickle.dumps(func)).part == "imag"
    x, g = leaf(values(3)), leaf(values(3, seed=1))
    derived, inputs = checks.grad_function(engine, tpf.WrongScale.apply, (x,), (g,))
    assert isinstance(derived, GradOfOutputs) and len(inputs) == 2
    (grad,) = pickle.loads(pickle.dumps(derived))(*inputs)
    np.testing.assert_allclose(grad.detach().numpy(), values(3, seed=1) * np.cos(values(3)) * 1.01)
    assert grad.requires_grad  # built with create_graph=True


def test_default_grad_outputs_have_the_outputs_dtypes():
    x, z = leaf(values(2, 3)), leaf(values(4, dtype="complex128"))
    tp.manual_seed(5)
    g_real, g_complex = checks.default_grad_outputs(engine, lambda x, z: (x * 2, z * z), (x, z), noncontiguous=False)
    tp.manual_seed(5)
    again = checks.default_grad_outputs(engine, lambda x, z: (x * 2, z * z), (x, z), noncontiguous=False)
    assert g_real.dtype == tp.float64 and tuple(g_real.shape) == (2, 3)
    assert g_complex.dtype == tp.complex128  # tensorplay's own gradgradcheck makes float64 ones here
    for g, h in zip((g_real, g_complex), again):
        assert g.requires_grad and g.is_leaf
        a = g.detach().numpy()
        np.testing.assert_array_equal(a, h.detach().numpy())
        assert np.all(np.abs(a.real) <= 1) and np.all(np.abs(a.imag) <= 1)
    (wide,) = checks.default_grad_outputs(engine, lambda x: x * 2, (x,), noncontiguous=True)
    assert not wide.is_contiguous() and tuple(wide.shape) == (2, 3) and wide.requires_grad


def test_format_block_shows_complex_values_and_small_real_values():
    real = engine.format_block(np.array([[1e-8, 2.5], [3.0, 0.0]]))
    assert real.startswith("tensor([[") and real.endswith("dtype=Float64)") and "1.0e-08" in real
    assert "2.5" in engine.format_block(np.array([[2.5]], dtype=np.float32))
    text = engine.format_block(np.array([[1 + 2j, 0.5 - 1j]]))
    assert "1. +2.j" in text and "0.5-1.j" in text and text.endswith("dtype=Complex128)")
    assert "\n" not in engine.format_block(np.zeros((0, 3)))


def test_threads_sets_one_thread_once_and_never_warns():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with engine.threads(1):
            assert tp.get_num_threads() == 1  # the count every distcheck unit asks for
        with engine.threads(2):  # tensorplay cannot change it again: a silent no-op
            assert float(tp.sin(tp.tensor(np.zeros(3))).sum()) == 0.0
