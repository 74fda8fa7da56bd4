"""The JAX engine.

1. Parity: every case is built twice from the same numpy values, as a JAX function (``jax.numpy``,
   the catalogue's ``jax.custom_vjp`` / ``custom_jvp`` functions) and as its torch twin.
   distcheck's verdict on the JAX function must equal torch.autograd's on the twin, except where
   JAX's semantics differ (written down, with the reason); in the default mode and in fast,
   forward-AD and batched modes.
2. ``jax.test_util.check_grads`` on the same functions: what it catches too, and what it misses.
3. The engine's primitives called directly (torch's complex convention, x64, random numbers).
Ray: tests/executors/test_jax_ray.py.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest

jax = pytest.importorskip("jax")
torch = pytest.importorskip("torch")

jax.config.update("jax_enable_x64", True)  # float64, as gradcheck's defaults expect (see X64_OFF)

import jax.numpy as jnp  # noqa: E402
from jax.test_util import check_grads  # noqa: E402

import distcheck  # noqa: E402
from distcheck.engines import get_engine, registry  # noqa: E402
from distcheck.engines.derivatives import column_jvp, row_vjp  # noqa: E402
from distcheck.engines.jax_engine import X64_OFF, JaxGradcheckError  # noqa: E402
from tests.catalogue import jax_functions as jf  # noqa: E402
from tests.catalogue.twins import (  # noqa: E402
    SHARED_CORRECT,
    SHARED_GRADGRAD,
    SHARED_WRONG,
    C,
    TwinCase,
    custom,
    maker,
    run_twin,
    values,
)

engine = get_engine("jax")


def test_the_registry_lists_jax():
    source = next(s for s in registry.sources() if s.name == "jax")
    assert source.target == "distcheck.engines.jax_engine:JaxEngine"
    assert (source.library, source.array_type) == ("jax", "Array")


def _jit(lib, name):
    """``lib.name``, jit-compiled for JAX."""
    function = getattr(lib, name)
    return jax.jit(function) if lib is jnp else function


def _softmax(lib):
    return jax.nn.softmax if lib is jnp else lambda x: torch.softmax(x, -1)


CORRECT = [
    *SHARED_CORRECT,
    TwinCase("sin_jit", lambda lib, t: (_jit(lib, "sin"), (t(3, 4),))),
    TwinCase("exp_mul_broadcast", lambda lib, t: (lambda x, y: lib.exp(x) * y, (t(3, 4), t(4, seed=1)))),
    TwinCase("matmul", lambda lib, t: (_jit(lib, "matmul"), (t(3, 4), t(4, 2, seed=1)))),
    TwinCase("sum_dim1", lambda lib, t: (lambda x: lib.sum(x, 1), (t(3, 4),))),
    TwinCase("softmax", lambda lib, t: (_softmax(lib), (t(3, 4),))),
    TwinCase("transposed_input", lambda lib, t: (lib.exp, (t(4, 3, transposed=True),))),
    TwinCase("complex_matmul", lambda lib, t: (lib.matmul, (t(2, 3, **C), t(3, seed=1, **C)))),
    TwinCase("abs_squared", lambda lib, t: (lambda z: lib.abs(z) ** 2, (t(4, **C),))),
    TwinCase("real_to_complex", lambda lib, t: (lambda x: x * (1 + 2j), (t(4),))),
    TwinCase("real_to_complex_fft", lambda lib, t: (lib.fft.fft, (t(5),))),
    TwinCase("right_jvp", lambda lib, t: (custom(lib, "RightJvp"), (t(4),))),
    # a numpy array is a constant handed to the function, as in torch
    TwinCase("constant_input", lambda lib, t: (lambda x, n: x * lib.asarray(n), (t(3), values(3, seed=1)))),
]

FORWARD_ONLY = {"check_forward_ad": True, "check_backward_ad": False, "check_undefined_grad": False}
JACOBIAN_MISMATCH = ("GradcheckError", "Jacobian mismatch for output 0 with respect to input 0,")

WRONG = [
    *SHARED_WRONG,
    # forward mode only: in reverse mode torch's twin is right (see DIFFERENT)
    TwinCase(
        "wrong_custom_jvp",
        lambda lib, t: (custom(lib, "WrongJvp"), (t(4),)),
        options=FORWARD_ONLY,
        torch_says="GradcheckError",
    ),
    TwinCase("no_float_input", lambda lib, t: (lambda x: x * 2, (lib.asarray(np.arange(3)),)), torch_says="ValueError"),
]

# where JAX's semantics differ from torch's: distcheck's verdict on the JAX function
DIFFERENT = [
    # JAX has no undefined grad-outputs: a custom_vjp's bwd always receives zeros
    TwinCase(
        "undefined_grad_raises",
        lambda lib, t: (custom(lib, "NoUndefinedGrad"), (t(3),)),
        torch_says="GradcheckError",
        differs=("pass", ""),
    ),
    # JAX's reverse mode of a wrong custom_jvp is the transposed wrong jvp (torch's twin: right backward)
    TwinCase("wrong_custom_jvp_reverse", lambda lib, t: (custom(lib, "WrongJvp"), (t(4),)), differs=JACOBIAN_MISMATCH),
    # an output cut off with stop_gradient is differentiated (zero Jacobian); torch skips a detached one
    TwinCase(
        "numerical_not_zero",
        lambda lib, t: (
            (lambda x: jax.lax.stop_gradient(x) * 2) if lib is jnp else (lambda x: x.detach() * 2),
            (t(3),),
        ),
        torch_says="GradcheckError",
        differs=JACOBIAN_MISMATCH,
    ),
]

GRADGRAD = [
    *SHARED_GRADGRAD,
    TwinCase("gg_matmul", lambda lib, t: (lib.matmul, (t(3, 4), t(4, 2, seed=1))), kind="gradgrad"),
    TwinCase("gg_softmax", lambda lib, t: (_softmax(lib), (t(4),)), kind="gradgrad"),
]

ALL = CORRECT + WRONG + DIFFERENT + GRADGRAD


def _check(case: TwinCase, **extra):
    np.random.seed(0)  # the JAX engine's random grad-outputs and vectors come from numpy's global RNG
    reference, ours = run_twin(case, torch, **extra), run_twin(case, jnp, **extra)
    if not extra:
        assert reference.verdict == case.torch_says, f"torch's verdict changed: {reference}"
    if case.differs is None:
        assert ours.comparable() == reference.comparable(), f"\ntorch:     {reference}\ndistcheck: {ours}"
    else:
        assert (ours.verdict, ours.kind) == case.differs, f"\ndistcheck: {ours}"


@pytest.mark.parametrize("case", ALL, ids=str)
def test_same_verdict_as_torch_on_the_twin(case):
    _check(case)


def _by_name(*names: str) -> list[TwinCase]:
    return [c for c in ALL if c.name in names]


# custom_vjp functions have no forward mode in JAX (jax.jvp raises TypeError), nor custom torch
# Functions without a jvp in torch: forward-mode runs use the cases without them
FORWARD = _by_name(
    "sin", "sin_jit", "matmul", "softmax", "two_outputs", "complex_mul_many_elements", "complex_sin_many_elements",
    "real_to_complex", "real_and_complex_inputs", "abs_squared", "right_jvp",
)  # fmt: skip
# not float32_input: fast mode's random vectors are numpy's, not torch's, and at float32 rounding
# decides a projection's verdict (torch's vectors happen to pass x * 2, numpy's do not)
FAST = _by_name(
    "sin_jit", "exp_mul_broadcast", "matmul", "complex_mul_many_elements", "complex_sin_many_elements",
    "real_to_complex", "real_and_complex_inputs_custom", "complex_to_real_abs", "abs_squared", "wrong_scale",
    "one_wrong_element", "transposed", "missing_conjugate", "wrong_real_to_complex", "wrong_imaginary_part",
    "wrong_real_input_of_complex", "zero_grad_not_zero", "gg_sin", "gg_complex", "gg_wrong_second_order",
)  # fmt: skip
MODES = {
    "fast": ({"fast_mode": True}, FAST),
    "forward": ({"check_forward_ad": True}, FORWARD),
    "forward_fast": ({"check_forward_ad": True, "fast_mode": True}, FORWARD),
    "batched": (
        {"check_batched_grad": True},
        _by_name(
            "sin",
            "matmul",
            "softmax",
            "complex_mul_many_elements",
            "real_and_complex_inputs_custom",
            "wrong_scale",
            "gg_sin",
        ),
    ),
    "batched_forward": ({"check_forward_ad": True, "check_batched_forward_grad": True}, FORWARD),
}
MODE_RUNS = [
    pytest.param(case, options, id=f"{case}-{mode}")
    for mode, (options, cases) in MODES.items()
    for case in cases
    if case.differs is None and not set(options) & set(case.options)
]


@pytest.mark.parametrize(("case", "options"), MODE_RUNS)
def test_same_verdict_as_torch_in_every_mode(case, options):
    _check(case, **options)


def test_a_backward_that_cannot_be_batched_fails_as_in_torch():
    case = TwinCase("item_in_backward", lambda lib, t: (custom(lib, "ItemInBackward"), (t(3),)))
    reference, ours = run_twin(case, torch, check_batched_grad=True), run_twin(case, jnp, check_batched_grad=True)
    assert reference.verdict == ours.verdict == "GradcheckError"
    assert reference.kind == ours.kind == "While computing batched gradients, got"
    assert "ConcretizationTypeError" in ours.message  # .item() of a vmap tracer


def test_a_custom_jvp_rule_is_traced_even_unbatched():
    # torch runs a Function's jvp eagerly: .item() in it breaks only under vmap (batched forward
    # grad); JAX traces a custom_jvp rule, so .item() breaks forward mode itself
    case = TwinCase("item_in_jvp", lambda lib, t: (custom(lib, "ItemInJvp"), (t(3),)))
    assert run_twin(case, torch, check_forward_ad=True).verdict == "pass"
    with pytest.raises(jax.errors.ConcretizationTypeError):
        distcheck.gradcheck(jf.ItemInJvp, (maker(jnp)(3),), check_forward_ad=True)


def test_errors_are_gradcheck_errors():
    with pytest.raises(JaxGradcheckError) as caught:
        distcheck.gradcheck(jf.WrongScale, (maker(jnp)(3),))
    assert isinstance(caught.value, distcheck.GradcheckError) and isinstance(caught.value, RuntimeError)


def test_forward_mode_of_a_custom_vjp_function_is_jaxs_error():
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
        distcheck.gradcheck(jf.WrongScale, (maker(jnp)(3),), check_forward_ad=True, check_backward_ad=False)


# ---------------------------------------------------------------------------------------------
# jax.test_util.check_grads on the same functions


def check_grads_verdict(func, inputs, **kwargs) -> str:
    try:
        check_grads(func, inputs, **kwargs)
    except AssertionError:
        return "fails"
    return "passes"


@pytest.mark.parametrize(
    "name, build, order",
    [
        ("WrongScale", lambda t: (t(3),), 1),
        ("OneWrongElement", lambda t: (t(2, 3),), 1),
        ("MissingConjugate", lambda t: (t(3, **C), t(3, seed=1, **C)), 1),
        ("WrongImaginaryPart", lambda t: (t(3, **C),), 1),
        ("WrongRealToComplex", lambda t: (t(3),), 1),
        ("WrongSecondOrder", lambda t: (t(3),), 2),
    ],
)
def test_check_grads_catches_these_too(name, build, order):
    inputs = build(maker(jnp))
    assert check_grads_verdict(custom(jnp, name), inputs, order=order, modes=["rev"]) == "fails"
    check = distcheck.gradgradcheck if order == 2 else distcheck.gradcheck
    assert not check(custom(jnp, name), inputs, raise_exception=False)


@pytest.mark.parametrize(
    "name, options, failure",
    [
        ("NoisyBackward", {}, "Backward is not reentrant"),  # check_grads runs each VJP once
        ("IgnoresZeroGrad", {}, "backward not multiplied by grad_output"),  # random cotangents are never zero
        ("ItemInBackward", {"check_batched_grad": True}, "While computing batched gradients"),  # no vmap
    ],
)
def test_check_grads_misses_what_distcheck_catches(name, options, failure):
    x = maker(jnp)(3)
    assert check_grads_verdict(custom(jnp, name), (x,), order=1, modes=["rev"]) == "passes"
    with pytest.raises(JaxGradcheckError, match=failure):
        distcheck.gradcheck(custom(jnp, name), (x,), **options)


def test_check_grads_cannot_check_a_custom_vjp_in_its_default_modes():
    x = maker(jnp)(3)
    for modes in (["fwd"], ["fwd", "rev"]):  # ["fwd", "rev"] is its default
        with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
            check_grads(jf.WrongScale, (x,), order=1, modes=modes)
    assert not distcheck.gradcheck(jf.WrongScale, (x,), raise_exception=False)


# ---------------------------------------------------------------------------------------------
# JAX semantics the README states


def test_randomness_jax_random_is_deterministic_host_noise_is_not_unless_jitted():
    x = maker(jnp)(3)
    assert distcheck.gradcheck(lambda x: x * jax.random.normal(jax.random.key(0), x.shape), (x,))
    assert not distcheck.gradcheck(jf.NoisyBackward, (x,), raise_exception=False)  # a new draw per VJP call
    assert distcheck.gradcheck(jax.jit(jf.NoisyBackward), (x,))  # the draw is a constant of the trace


def test_custom_vjp_objects_do_not_unpickle_and_float64_needs_x64_where_it_is_unpickled():
    from ray import cloudpickle

    with pytest.raises(TypeError):
        cloudpickle.loads(cloudpickle.dumps(jf.WrongScale))
    script = (
        "import pickle, sys, jax; a = pickle.loads(sys.stdin.buffer.read()); print(a.dtype, float(a[0]) == 1 + 2**-40)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], input=pickle.dumps(jnp.asarray([1 + 2**-40])), capture_output=True, check=True
    )
    assert done.stdout.split() == [b"float32", b"False"]  # silently rounded: x64 is off in that process


# ---------------------------------------------------------------------------------------------
# Engine primitives


def test_complex_convention_is_torchs():
    z = jnp.asarray([1 + 2j])
    assert complex(jax.grad(lambda z: jnp.sum(jnp.abs(z) ** 2))(z)[0]) == 2 - 4j  # JAX's convention
    (grad,) = row_vjp(engine, lambda z: jnp.abs(z) ** 2, (z,), 0, [0])(0)
    zt = torch.tensor([1 + 2j], requires_grad=True)
    (expected,) = torch.autograd.grad((zt.abs() ** 2).sum(), zt)
    assert grad.tolist() == expected.tolist() == [2 + 4j]


def test_vjp_and_jvp_of_a_non_holomorphic_function_match_torch():
    c = values(3, **C)
    g, tangent = values(3, seed=1, **C), values(3, seed=2, **C)
    (grad,) = row_vjp(engine, lambda z: z * jnp.conj(z) ** 2, (jnp.asarray(c),), 0, [0])(g)
    (out,) = column_jvp(engine, lambda z: z * jnp.conj(z) ** 2, (jnp.asarray(c),), [0])(0, tangent)
    zt = torch.tensor(c, requires_grad=True)
    (expected,) = torch.autograd.grad(zt * zt.conj() ** 2, zt, torch.tensor(g))
    np.testing.assert_allclose(grad, expected.numpy(), rtol=1e-14)
    with torch.autograd.forward_ad.dual_level():
        dual = torch.autograd.forward_ad.make_dual(torch.tensor(c), torch.tensor(tangent))
        expected_tangent = torch.autograd.forward_ad.unpack_dual(dual * dual.conj() ** 2).tangent
    np.testing.assert_allclose(out, expected_tangent.numpy(), rtol=1e-14)


def test_info_every_float_or_complex_array_is_differentiated():
    x, z, n = jnp.asarray(values(2, 3)), jnp.asarray(values(3, **C)), jnp.arange(3)
    info = engine.info(x)
    assert (info.shape, info.dtype, info.dtype_name) == ((2, 3), np.dtype(np.float64), "jax.float64")
    assert info.requires_grad and info.is_floating and info.is_double and not info.is_complex
    assert engine.info(z).is_complex and engine.info(z).requires_grad and not engine.info(z).is_floating
    assert not engine.info(n).requires_grad
    assert engine.is_tensor(x) and not engine.is_tensor(values(3)) and not engine.is_tensor(torch.zeros(2))


def test_evaluators_leave_the_inputs_alone():
    a = values(2, 3)
    x = jnp.asarray(a)
    (out,) = engine.perturbed_evaluator(lambda x: x * 1, (x,), 0, [True])(4, 0.5)
    expected = a.copy()
    expected[1, 1] += 0.5
    np.testing.assert_array_equal(out, expected)
    (moved,) = engine.direction_evaluator(jnp.sin, (x,), 0, [True])(np.full((2, 3), 1e-3))
    np.testing.assert_allclose(moved, np.sin(a + 1e-3), rtol=1e-14)
    np.testing.assert_array_equal(np.asarray(x), a)
    with pytest.raises(ValueError, match="complex direction for a real input"):
        engine.direction_evaluator(jnp.sin, (x,), 0, [True])(np.full((2, 3), 1e-3j))


def test_random_numbers_come_from_numpys_global_rng():
    out = jnp.asarray(values(4, **C))
    np.random.seed(3)
    first = engine.random_grad_outputs([out], noncontiguous=True)[0]
    np.random.seed(3)
    again = engine.random_grad_outputs([out], noncontiguous=False)[0]
    np.testing.assert_array_equal(np.asarray(first), np.asarray(again))
    assert first.dtype == jnp.complex128 and np.all(np.abs(np.asarray(first).real) <= 1)
    np.random.seed(3)
    (normal,) = engine.random_normal([(20000,)], [np.dtype(np.float64)])
    assert abs(normal.mean()) < 0.05 and abs(normal.std() - 1) < 0.05


def test_x64_off_is_said_and_left_off():
    jax.config.update("jax_enable_x64", False)
    try:
        x = jnp.asarray(np.ones(3, dtype=np.float32))
        with pytest.warns(UserWarning, match="jax_enable_x64"):
            engine.info(x, jnp.sin, 0)
        assert not jax.config.jax_enable_x64
    finally:
        jax.config.update("jax_enable_x64", True)
    assert "distcheck does not change JAX's global configuration" in X64_OFF
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        engine.info(jnp.asarray(np.ones(3, dtype=np.float32)), jnp.sin, 0)  # x64 on: float32 is a choice


def test_format_block():
    assert engine.format_block(np.array([[1e-8, 2.5]])) == "Array([[1.0e-08, 2.5e+00]], dtype=float64)"
    assert "1.+2.j" in engine.format_block(np.array([[1 + 2j]]))
