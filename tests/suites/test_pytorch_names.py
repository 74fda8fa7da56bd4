"""PyTorch's test names of torch-opinfo cases, against the names torch's own
``@ops`` and ``instantiate_device_type_tests`` give test classes shaped as PyTorch's files."""

from __future__ import annotations

import pytest
import torch
from torch.testing._internal.common_device_type import OpDTypes, instantiate_device_type_tests, ops
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_utils import TestCase
from torch.testing._internal.custom_op_db import custom_op_db
from torch.testing._internal.hop_db import hop_db

from distcheck.suites.base import CaseId
from distcheck.suites.torch_opinfo.pytorch_names import TESTS, PyTorchTest, pytorch_test, pytorch_test_of

# plain names, dotted names, variant names (dotted ones too), a hop op, a custom op
NAMES = ("sinh", "nn.functional.conv2d", "var_mean.unbiased", "norm.fro", "linalg.vector_norm", "mm")
EXTRA = (hop_db[0], custom_op_db[0])


def _ops():
    table = {op.full_name: op for op in op_db}
    return [table[name] for name in NAMES] + list(EXTRA)


def _instantiated(generic: str, methods: list[str]) -> dict[str, type]:
    """``instantiate_device_type_tests`` of a class named ``generic`` with a test method per
    name in ``methods``, each parametrized as PyTorch's gradient files do."""
    decorate = ops(_ops(), dtypes=OpDTypes.supported, allowed_dtypes=[torch.double, torch.cdouble])
    body = {name: decorate(lambda self, device, dtype, op: None) for name in methods}
    scope: dict[str, type] = {generic: type(generic, (TestCase,), body)}
    instantiate_device_type_tests(scope[generic], scope, only_for="cpu")  # replaces it by its device classes
    return scope


def _expected_names() -> set[tuple[str, str, str]]:
    names = set()
    for check in TESTS:
        for op in _ops():
            for dtype in op.supported_dtypes("cpu") & {torch.float64, torch.complex128}:
                test = pytorch_test(check, op.full_name, str(dtype).removeprefix("torch."))
                names.add((test.file, test.classname, test.name))
    return names


def test_every_check_kind_is_named_as_torch_instantiates_its_test():
    files = {kind.generic_class: kind.file for kind in TESTS.values()}
    made = set()
    for generic, file in files.items():
        methods = [kind.method for kind in TESTS.values() if kind.generic_class == generic]
        for classname, cls in _instantiated(generic, methods).items():
            made |= {(file, classname, name) for name in vars(cls) if name.startswith("test_")}
    assert made == _expected_names()
    assert ("test_ops_gradients.py", "TestBwdGradientsCPU", "test_fn_grad_var_mean_unbiased_cpu_float64") in made
    assert (
        "test_ops_fwd_gradients.py",
        "TestFwdGradientsCPU",
        "test_inplace_forward_mode_AD_sinh_cpu_complex128",
    ) in made


def test_a_case_is_its_tests_sample():
    test = pytorch_test_of(CaseId("torch-opinfo", "nn.functional.conv2d", "complex128", "fwgrad_bwgrad", 3))
    assert test == PyTorchTest(
        "test_ops_fwd_gradients.py", "TestFwdGradientsCPU", "test_fn_fwgrad_bwgrad_nn_functional_conv2d_cpu_complex128"
    )
    assert test.key == "test_fn_fwgrad_bwgrad_nn_functional_conv2d_cpu_complex128 (__main__.TestFwdGradientsCPU)"
    assert test.node_id.startswith("test_ops_fwd_gradients.py::TestFwdGradientsCPU::test_fn_fwgrad")
    assert (
        pytorch_test_of(CaseId("torch-opinfo", "cov", "float64", "fail_gradgrad")).name
        == "test_fn_fail_gradgrad_cov_cpu_float64"
    )


def test_an_unknown_check_kind_has_no_test():
    with pytest.raises(KeyError, match="no PyTorch test for check kind 'hessian'"):
        pytorch_test("hessian", "sinh", "float64")
