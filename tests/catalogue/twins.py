"""Twin cases: one case built as a function of another library and as its torch twin, from the
same numpy values, so that torch.autograd.gradcheck's verdict on the twin is the expected verdict
of distcheck on the library's function (tensorplay, JAX)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tests.catalogue.functions import raises_value_error, threshold_select
from tests.parity.cases import Case
from tests.parity.runner import Outcome, run


def values(*shape: int, dtype: str = "float64", seed: int = 0, scale: float = 1.0, offset: float = 0.0) -> np.ndarray:
    rng = np.random.default_rng([seed, len(shape), *shape])
    a = rng.standard_normal(shape)
    if dtype.startswith("complex"):
        a = a + 1j * rng.standard_normal(shape)
    return (a * scale + offset).astype(dtype)


def library(lib) -> str:
    """The catalogue's name of a library module (``jax.numpy`` is "jax")."""
    return lib.__name__.split(".")[0]


def kit(lib):
    return importlib.import_module(f"tests.catalogue.{library(lib)}_functions").KIT


def maker(lib) -> Callable[..., Any]:
    """``t(*shape, dtype=, seed=, requires_grad=, transposed=, ...)``: a tensor of ``lib``."""
    make = kit(lib).tensor

    def t(*shape, requires_grad=True, transposed=False, **kwargs):
        return make(values(*shape, **kwargs), requires_grad=requires_grad, transposed=transposed)

    return t


def custom(lib, name: str) -> Callable:
    """Catalogue entry ``name`` made in ``lib`` (the library, or its torch twin)."""
    return kit(lib).function(name)


@dataclass(frozen=True)
class TwinCase:
    name: str
    build: Callable[[Any, Callable], tuple]  # (lib, t) -> (func, inputs[, extra keyword arguments])
    kind: str = "grad"
    options: dict[str, Any] = field(default_factory=dict)
    torch_says: str = "pass"  # torch's verdict on the twin (asserted: a case cannot silently go stale)
    # distcheck's (verdict, kind) on the library's function where the library differs from torch
    # (its autodiff is wrong, or its semantics differ); None: the same as torch's on the twin
    differs: tuple[str, str] | None = None

    def __str__(self) -> str:
        return self.name

    def case(self, lib) -> Case:
        return Case(self.name, lambda: self.build(lib, maker(lib)), self.kind, self.options)


def run_twin(case: TwinCase, lib, **extra) -> Outcome:
    """The case run by torch.autograd (``lib`` torch) or by distcheck (any other library)."""
    return run(case.case(lib), "torch" if library(lib) == "torch" else "distcheck", **extra)


# -- cases every library shares (function style: ``lib.sin(x)``, which JAX arrays need) ---------

C = {"dtype": "complex128"}

SHARED_CORRECT = [
    TwinCase("sin", lambda lib, t: (lib.sin, (t(3, 4),))),
    TwinCase("prod", lambda lib, t: (lib.prod, (t(5, offset=0.5),))),
    TwinCase("two_outputs", lambda lib, t: (lambda x, y: (x * y, x + y), (t(3), t(3, seed=1)))),
    TwinCase("integer_output_last", lambda lib, t: (lambda x: (x * 2, x.argmax()), (t(4),))),
    TwinCase("scalar_output", lambda lib, t: (lambda x: (x**2).sum(), (t(3, 2),))),
    TwinCase("zero_dim_input", lambda lib, t: (lambda x: lib.sin(x) * 3, (t(),))),
    TwinCase("non_tensor_argument", lambda lib, t: (lambda x, k: x**k, (t(3), 3))),
    TwinCase("unused_input", lambda lib, t: (lambda x, y: x * 2, (t(3), t(2, seed=1)))),
    # complex: tensorplay's own gradcheck fails z*z and sin(z) with more than one output element
    TwinCase("complex_mul_many_elements", lambda lib, t: (lambda z: z * z, (t(12, **C),))),
    TwinCase("complex_sin_many_elements", lambda lib, t: (lib.sin, (t(3, 4, **C),))),
    TwinCase("real_to_complex_custom", lambda lib, t: (custom(lib, "RealToComplex"), (t(4),))),
    TwinCase("real_and_complex_inputs", lambda lib, t: (lambda z, x: z * x, (t(3, **C), t(3, seed=1)))),
    TwinCase(
        "real_and_complex_inputs_custom",
        lambda lib, t: (custom(lib, "ComplexTimesReal"), (t(3, **C), t(3, seed=1))),
    ),
    TwinCase("complex_to_real_abs", lambda lib, t: (lib.abs, (t(4, **C),))),
    TwinCase(
        "nondet_backward_with_tol", lambda lib, t: (custom(lib, "NoisyBackward"), (t(3),)), options={"nondet_tol": 1e-6}
    ),
    TwinCase(
        "custom_tolerances", lambda lib, t: (custom(lib, "WrongScale"), (t(3),)), options={"rtol": 0.05, "atol": 1e-2}
    ),
    TwinCase("check_grad_dtypes_ok", lambda lib, t: (lib.tanh, (t(3),)), options={"check_grad_dtypes": True}),
]


def _wrong(name: str, entry: str, *inputs: tuple[tuple, dict], **options) -> TwinCase:
    """Catalogue entry ``entry`` at ``inputs`` (shapes and keyword arguments of ``t``): torch fails it."""

    def build(lib, t):
        return custom(lib, entry), tuple(t(*shape, **kwargs) for shape, kwargs in inputs)

    return TwinCase(name, build, torch_says="GradcheckError", options=options)


def _shape(*shape: int, **kwargs) -> tuple[tuple, dict]:
    return shape, kwargs


SHARED_WRONG = [
    _wrong("wrong_scale", "WrongScale", _shape(3, 4)),
    _wrong("one_wrong_element", "OneWrongElement", _shape(2, 3)),
    _wrong("transposed", "Transposed", _shape(3, 3), _shape(3, 3, seed=1)),
    _wrong("nondet_backward", "NoisyBackward", _shape(3)),
    _wrong("missing_conjugate", "MissingConjugate", _shape(3, **C), _shape(3, seed=1, **C)),
    _wrong("wrong_second_output", "WrongSecondOutput", _shape(3)),
    _wrong("zero_grad_not_zero", "IgnoresZeroGrad", _shape(3)),
    _wrong("wrong_real_to_complex", "WrongRealToComplex", _shape(3)),
    _wrong("wrong_imaginary_part", "WrongImaginaryPart", _shape(3, **C)),
    _wrong("wrong_second_input", "WrongSecondInput", _shape(3), _shape(3, seed=1)),
    _wrong("wrong_real_input_of_complex", "WrongRealInputOfComplex", _shape(3, **C), _shape(3, seed=1)),
    # complex functions get the reentrancy and zero-grad checks too (tensorplay's own skips them)
    _wrong("complex_nondet_backward", "NoisyComplexBackward", _shape(3, **C), atol=1e-2),
    _wrong("complex_zero_grad_not_zero", "ComplexIgnoresZeroGrad", _shape(3, **C)),
    _wrong("wrong_on_non_contiguous_input", "WrongScale", _shape(4, 3, transposed=True)),
    TwinCase("float32_input", lambda lib, t: (lambda x: x * 2, (t(3, dtype="float32"),)), torch_says="GradcheckError"),
    TwinCase(
        "shape_changes_under_perturbation",
        lambda lib, t: (threshold_select, (kit(lib).tensor(np.array([0.1, 0.5, 0.9])),)),
        torch_says="AssertionError",
    ),
    TwinCase("user_function_raises", lambda lib, t: (raises_value_error, (t(3),)), torch_says="ValueError"),
]

SHARED_GRADGRAD = [
    TwinCase("gg_sin", lambda lib, t: (lib.sin, (t(3, 2),)), kind="gradgrad"),
    TwinCase("gg_complex_mul", lambda lib, t: (lambda z: z * z, (t(3, **C),)), kind="gradgrad"),
    TwinCase("gg_complex", lambda lib, t: (lambda z: z * lib.sin(z), (t(3, **C),)), kind="gradgrad"),
    TwinCase("gg_two_outputs", lambda lib, t: (lambda x: (lib.exp(x), x * x), (t(3),)), kind="gradgrad"),
    TwinCase(
        "gg_given_grad_outputs",
        lambda lib, t: (lambda x: lib.sin(x) * x, (t(3),), {"grad_outputs": (t(3, seed=7),)}),
        kind="gradgrad",
    ),
    TwinCase(
        "gg_wrong_second_order",
        lambda lib, t: (custom(lib, "WrongSecondOrder"), (t(3),)),
        kind="gradgrad",
        torch_says="GradcheckError",
    ),
    # gradgradcheck checks the backward's own derivative: a wrong but differentiable backward passes
    TwinCase("gg_wrong_first_order_passes", lambda lib, t: (custom(lib, "WrongScale"), (t(3),)), kind="gradgrad"),
    TwinCase("gg_linear_is_zero", lambda lib, t: (lambda x: x * 3, (t(3),)), kind="gradgrad"),
]
