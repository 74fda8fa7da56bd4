"""Parity cases: checks run by both torch.autograd and distcheck, whose verdicts must agree.

Each case builds fresh, deterministic inputs. ``kind`` is "grad" or "gradgrad"; ``options``
are keyword arguments for both libraries' functions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from tests.catalogue import torch_functions as tf


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[], tuple]  # () -> (func, inputs) or (func, inputs, extra keyword arguments)
    kind: str = "grad"
    options: dict[str, Any] = field(default_factory=dict)
    expect: str = "pass"  # torch's verdict in the default mode (asserted, so a case cannot silently go stale)

    def __str__(self) -> str:
        return self.name


def _t(*shape, dtype=torch.float64, seed=0, requires_grad=True, scale=1.0, offset=0.0):
    g = torch.Generator().manual_seed(seed + 1000 * len(shape) + sum(shape))
    x = torch.randn(shape, generator=g, dtype=dtype) * scale + offset
    return x.requires_grad_(requires_grad)


def _spd(n):
    a = _t(n, n, requires_grad=False)
    return (a @ a.t() + n * torch.eye(n, dtype=torch.float64)).requires_grad_()


def _at_threshold():
    x = torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64, requires_grad=True)
    return x


CORRECT = [
    Case("sin", lambda: (torch.sin, (_t(3, 4),))),
    Case("exp_mul_broadcast", lambda: (lambda x, y: x.exp() * y, (_t(3, 4), _t(4, seed=1)))),
    Case("sum_dim1", lambda: (lambda x: x.sum(1), (_t(3, 4),))),
    Case("mean_dim0", lambda: (lambda x: x.mean(0), (_t(3, 4),))),
    Case("prod", lambda: (torch.prod, (_t(5, offset=0.5),))),
    Case("matmul", lambda: (torch.matmul, (_t(3, 4), _t(4, 2, seed=1)))),
    Case("conv2d", lambda: (F.conv2d, (_t(1, 2, 5, 5), _t(3, 2, 3, 3, seed=1), _t(3, seed=2)))),
    Case("conv1d_stride", lambda: (lambda x, w: F.conv1d(x, w, stride=2), (_t(2, 2, 7), _t(3, 2, 3, seed=1)))),
    Case("linear", lambda: (F.linear, (_t(4, 3), _t(2, 3, seed=1), _t(2, seed=2)))),
    Case("det", lambda: (torch.linalg.det, (_t(3, 3),))),
    Case("inv", lambda: (torch.linalg.inv, (_spd(3),))),
    Case("solve", lambda: (torch.linalg.solve, (_spd(3), _t(3, 2, seed=1)))),
    Case("cholesky", lambda: (lambda a: torch.linalg.cholesky((a + a.mT) / 2), (_spd(3),))),
    Case("sort_values_and_indices", lambda: (lambda x: torch.sort(x, dim=1), (_t(3, 4),))),
    Case("max_dim", lambda: (lambda x: torch.max(x, dim=0), (_t(3, 4),))),
    Case("two_outputs", lambda: (lambda x, y: (x * y, x + y), (_t(3), _t(3, seed=1)))),
    Case("integer_output_last", lambda: (lambda x: (x * 2, x.argmax()), (_t(4),))),
    Case("softmax", lambda: (lambda x: x.softmax(-1), (_t(3, 4),))),
    Case("log_softmax", lambda: (lambda x: F.log_softmax(x, dim=0), (_t(3, 4),))),
    Case("cross_entropy", lambda: (lambda x: F.cross_entropy(x, torch.tensor([0, 2, 1])), (_t(3, 4),))),
    Case("layer_norm", lambda: (lambda x, w: F.layer_norm(x, (4,), w), (_t(3, 4), _t(4, seed=1)))),
    Case("cumsum", lambda: (lambda x: x.cumsum(0), (_t(5),))),
    Case("norm", lambda: (torch.linalg.norm, (_t(3, 4),))),
    Case("atan2", lambda: (torch.atan2, (_t(4), _t(4, seed=1)))),
    Case("scalar_output", lambda: (lambda x: (x**2).sum(), (_t(3, 2),))),
    Case("zero_dim_input", lambda: (lambda x: x.sin() * 3, (_t(),))),
    Case("empty_input", lambda: (lambda x: x * 2, (torch.zeros(0, 3, dtype=torch.float64, requires_grad=True),))),
    Case("non_contiguous_input", lambda: (lambda x: x.exp(), (_t(4, 3).detach().t().requires_grad_(),))),
    Case("non_tensor_argument", lambda: (lambda x, k: x.pow(k), (_t(3), 3))),
    Case("input_without_grad", lambda: (lambda x, n: x * n, (_t(3), _t(3, seed=1, requires_grad=False)))),
    Case("unused_input", lambda: (lambda x, y: x * 2, (_t(3), _t(2, seed=1)))),
    Case("no_differentiable_output", lambda: (lambda x: (x > 0).double(), (_t(4),))),
    Case("non_differentiable_float_output_first", lambda: (lambda x: (x.detach() * 2, x * 3), (_t(3),))),
    Case("complex_mul_complex", lambda: (lambda z: z * z, (_t(4, dtype=torch.complex128),))),
    Case("complex_sin", lambda: (torch.sin, (_t(2, 3, dtype=torch.complex128),))),
    Case("complex_matmul", lambda: (torch.matmul, (_t(2, 3, dtype=torch.complex128), _t(3, dtype=torch.complex128)))),
    Case("real_to_complex", lambda: (lambda x: x * (1 + 2j), (_t(4),))),
    Case("real_to_complex_fft", lambda: (torch.fft.fft, (_t(5),))),
    Case("real_and_complex_inputs", lambda: (lambda x, z: x * z, (_t(3), _t(3, dtype=torch.complex128)))),
    Case("complex_to_real_abs", lambda: (torch.abs, (_t(4, dtype=torch.complex128),))),
    Case("complex_to_real_view", lambda: (torch.view_as_real, (_t(3, dtype=torch.complex128),))),
    Case("nondet_backward_with_tol", lambda: (tf.NoisyBackward.apply, (_t(3),)), options={"nondet_tol": 1e-6}),
    Case(
        "undefined_grad_unchecked",
        lambda: (tf.NoUndefinedGrad.apply, (_t(3),)),
        options={"check_undefined_grad": False},
    ),
    Case("custom_tolerances", lambda: (tf.WrongScale.apply, (_t(3),)), options={"rtol": 0.05, "atol": 1e-2}),
    Case("check_grad_dtypes_ok", lambda: (torch.tanh, (_t(3),)), options={"check_grad_dtypes": True}),
]

WRONG = [
    Case("wrong_scale", lambda: (tf.WrongScale.apply, (_t(3, 4),)), expect="GradcheckError"),
    Case("one_wrong_element", lambda: (tf.OneWrongElement.apply, (_t(2, 3),)), expect="GradcheckError"),
    Case("transposed", lambda: (tf.Transposed.apply, (_t(3, 3), _t(3, 3, seed=1))), expect="GradcheckError"),
    Case("nondet_backward", lambda: (tf.NoisyBackward.apply, (_t(3),)), expect="GradcheckError"),
    Case("undefined_grad_raises", lambda: (tf.NoUndefinedGrad.apply, (_t(3),)), expect="GradcheckError"),
    Case(
        "undefined_second_grad_raises",
        lambda: (tf.NoUndefinedSecondGrad.apply, (_t(3),)),
        expect="GradcheckError",
    ),
    Case(
        "missing_conjugate",
        lambda: (tf.MissingConjugate.apply, (_t(3, dtype=torch.complex128), _t(3, dtype=torch.complex128, seed=1))),
        expect="GradcheckError",
    ),
    Case("wrong_second_output", lambda: (tf.WrongSecondOutput.apply, (_t(3),)), expect="GradcheckError"),
    Case("zero_grad_not_zero", lambda: (tf.IgnoresZeroGrad.apply, (_t(3),)), expect="GradcheckError"),
    Case("wrong_real_to_complex", lambda: (tf.WrongRealToComplex.apply, (_t(3),)), expect="GradcheckError"),
    Case(
        "wrong_imaginary_part",
        lambda: (tf.WrongImaginaryPart.apply, (_t(3, dtype=torch.complex128),)),
        expect="GradcheckError",
    ),
    Case(
        "wrong_real_part", lambda: (tf.WrongRealPart.apply, (_t(3, dtype=torch.complex128),)), expect="GradcheckError"
    ),
    Case("wrong_second_input", lambda: (tf.WrongSecondInput.apply, (_t(3), _t(3, seed=1))), expect="GradcheckError"),
    Case(
        "wrong_on_non_contiguous_input",
        lambda: (tf.WrongScale.apply, (_t(4, 3).detach().t().requires_grad_(),)),
        expect="GradcheckError",
    ),
    Case("numerical_not_zero", lambda: (lambda x: x.detach() * 2, (_t(3),)), expect="GradcheckError"),
    Case("float32_input", lambda: (lambda x: x * 2, (_t(3, dtype=torch.float32),)), expect="GradcheckError"),
    Case(
        "shape_changes_under_perturbation", lambda: (tf.threshold_select, (_at_threshold(),)), expect="AssertionError"
    ),
    Case("user_function_raises", lambda: (tf.raises_value_error, (_t(3),)), expect="ValueError"),
    Case("no_input_requires_grad", lambda: (torch.sin, (_t(3, requires_grad=False),)), expect="ValueError"),
    Case(
        "expanded_input",
        lambda: (lambda x: x * 2, (_t(1, requires_grad=False).expand(3).requires_grad_(),)),
        expect="RuntimeError",
    ),
    Case("neither_mode", lambda: (torch.sin, (_t(3),)), options={"check_backward_ad": False}, expect="AssertionError"),
]

GRADGRAD = [
    Case("gg_sin", lambda: (torch.sin, (_t(3, 2),)), kind="gradgrad"),
    Case("gg_matmul", lambda: (torch.matmul, (_t(3, 4), _t(4, 2, seed=1))), kind="gradgrad"),
    Case("gg_conv2d", lambda: (F.conv2d, (_t(1, 1, 4, 4), _t(2, 1, 2, 2, seed=1))), kind="gradgrad"),
    Case("gg_det", lambda: (torch.linalg.det, (_t(3, 3),)), kind="gradgrad"),
    Case("gg_softmax", lambda: (lambda x: x.softmax(0), (_t(4),)), kind="gradgrad"),
    Case("gg_complex", lambda: (lambda z: z * z.sin(), (_t(3, dtype=torch.complex128),)), kind="gradgrad"),
    Case("gg_two_outputs", lambda: (lambda x: (x.exp(), x * x), (_t(3),)), kind="gradgrad"),
    Case(
        "gg_given_grad_outputs",
        lambda: (lambda x: x.tanh(), (_t(3),), {"grad_outputs": (_t(3, seed=7),)}),
        kind="gradgrad",
    ),
    Case(
        "gg_wrong_second_order", lambda: (tf.WrongSecondOrder.apply, (_t(3),)), kind="gradgrad", expect="GradcheckError"
    ),
    # gradgradcheck checks the backward's own derivative: a wrong but differentiable backward passes
    Case("gg_wrong_first_order_passes", lambda: (tf.WrongScale.apply, (_t(3),)), kind="gradgrad"),
    Case("gg_linear_is_zero", lambda: (lambda x: x * 3, (_t(3),)), kind="gradgrad"),
]

MODE_CASES = [
    Case("jvp_right", lambda: (tf.RightJvp.apply, (_t(4),))),
    Case("jvp_wrong", lambda: (tf.WrongJvp.apply, (_t(4),))),
    Case("item_in_backward", lambda: (tf.ItemInBackward.apply, (_t(3),))),
    Case("small_error_everywhere", lambda: (tf.SmallErrorEverywhere.apply, (_t(6, offset=1.0),))),
    Case("item_in_jvp", lambda: (tf.ItemInJvp.apply, (_t(3),))),
    Case("gg_jvp_wrong", lambda: (tf.WrongJvp.apply, (_t(3),)), kind="gradgrad"),
    Case("gg_wrong_forward_over_reverse", lambda: (tf.WrongForwardOverReverse.apply, (_t(3),)), kind="gradgrad"),
    Case("gg_item_in_double_backward", lambda: (tf.ItemInDoubleBackward.apply, (_t(3),)), kind="gradgrad"),
    Case(
        "gg_non_contiguous_grad_outputs",
        lambda: (lambda x: (x * x).sum(1), (_t(3, 4),)),
        kind="gradgrad",
        options={"gen_non_contig_grad_outputs": True},
    ),
]


def _sparse(layout, dense_dims=0):
    indices = torch.tensor([[0, 1, 1, 2], [2, 0, 2, 1]])
    values = _t(4, *([2] * dense_dims), requires_grad=False)
    x = torch.sparse_coo_tensor(indices, values, (3, 3, *([2] * dense_dims))).coalesce()
    return (x if layout == "coo" else x.to_sparse_csr()).requires_grad_()


# Sparse inputs: torch's gradcheck perturbs every element (densified) unless masked=True, when
# unspecified elements are ignored; the function's to_dense(masked_grad=...) decides the gradient.
SPARSE = [
    Case("sparse_coo_dense_grad", lambda: (lambda x: x.to_dense(masked_grad=False).sin(), (_sparse("coo"),))),
    Case("sparse_csr_dense_grad", lambda: (lambda x: x.to_dense(masked_grad=False).exp(), (_sparse("csr"),))),
    Case(
        "sparse_coo_masked_grad",
        lambda: (lambda x: x.to_dense(masked_grad=True).sin(), (_sparse("coo"),)),
        expect="GradcheckError",
    ),
    Case(
        "sparse_csr_masked_grad",
        lambda: (lambda x: x.to_dense(masked_grad=True).exp(), (_sparse("csr"),)),
        expect="GradcheckError",
    ),
    Case("sparse_hybrid_coo", lambda: (lambda x: x.to_dense(masked_grad=False) * 3, (_sparse("coo", 1),))),
    Case(
        "sparse_mm",
        lambda: (lambda a, b: torch.sparse.mm(a, b), (_sparse("coo"), _t(3, 2, seed=1))),
        expect="GradcheckError",
    ),
    Case(
        "sparse_wrong_backward",
        lambda: (lambda x: tf.WrongScale.apply(x.to_dense()), (_sparse("coo"),)),
        expect="GradcheckError",
    ),
]
SPARSE_MODES = {
    "masked": {"masked": True},
    "fast": {"fast_mode": True},
    "masked_fast": {"masked": True, "fast_mode": True},
}

ALL = CORRECT + WRONG + GRADGRAD + MODE_CASES + SPARSE

# Every option of gradcheck / gradgradcheck besides the defaults; each case runs in each mode.
GRAD_MODES = {  # besides SPARSE_MODES, for sparse cases
    "fast": {"fast_mode": True},
    "forward": {"check_forward_ad": True},
    "forward_only": {"check_forward_ad": True, "check_backward_ad": False, "check_undefined_grad": False},
    "forward_fast": {"check_forward_ad": True, "fast_mode": True},
    "batched": {"check_batched_grad": True},
    "batched_forward": {"check_forward_ad": True, "check_batched_forward_grad": True},
    "batched_fast": {"check_batched_grad": True, "fast_mode": True},
}
GRADGRAD_MODES = {  # besides SPARSE_MODES, for sparse cases
    "fast": {"fast_mode": True},
    "fwd_over_rev": {"check_fwd_over_rev": True},
    "fwd_over_rev_only": {"check_fwd_over_rev": True, "check_rev_over_rev": False, "check_undefined_grad": False},
    "batched": {"check_batched_grad": True},
    "non_contiguous": {"gen_non_contig_grad_outputs": True},
}
