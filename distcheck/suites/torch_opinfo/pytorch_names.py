"""PyTorch's own name of the test a torch-opinfo case belongs to.

PyTorch's gradient tests are generic test classes (``TestBwdGradients`` in
``test_ops_gradients.py``, ``TestFwdGradients`` in ``test_ops_fwd_gradients.py``) whose methods
``@ops`` parametrizes by op and dtype and ``instantiate_device_type_tests`` instantiates per
device: class ``TestBwdGradientsCPU``, method ``test_fn_grad_sinh_cpu_float64``, that is
``<method>_<op.formatted_name>_<device>_<dtype>``, where ``formatted_name`` is the op's
``full_name`` (the case id's op) with every ``.`` replaced by ``_``. Every sample of an
(op, dtype) is one such test, and a test of each check kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from distcheck.suites.base import CaseId

BACKWARD_FILE, FORWARD_FILE = "test_ops_gradients.py", "test_ops_fwd_gradients.py"
BACKWARD_CLASS, FORWARD_CLASS = "TestBwdGradients", "TestFwdGradients"
DEVICE = "cpu"
# PyTorch's OpInfo lists (``torch.testing._internal``), as the files' @ops decorators name them
OP_DB, HOP_DB, CUSTOM_OP_DB = "op_db", "hop_db", "custom_op_db"


class PyTorchMethod(NamedTuple):
    """Where a check kind's PyTorch test is written, and the op lists it is instantiated over."""

    file: str  # test_ops_gradients.py
    generic_class: str  # TestBwdGradients
    method: str  # test_fn_grad
    databases: tuple[str, ...]  # its @ops decorator's op lists: an op outside them has no such test


# check kind -> its PyTorch test: the one table of the files' tests (names, status, op lists)
TESTS = {
    "grad": PyTorchMethod(BACKWARD_FILE, BACKWARD_CLASS, "test_fn_grad", (OP_DB, HOP_DB, CUSTOM_OP_DB)),
    "gradgrad": PyTorchMethod(BACKWARD_FILE, BACKWARD_CLASS, "test_fn_gradgrad", (OP_DB, HOP_DB, CUSTOM_OP_DB)),
    "inplace_grad": PyTorchMethod(BACKWARD_FILE, BACKWARD_CLASS, "test_inplace_grad", (OP_DB, CUSTOM_OP_DB)),
    "inplace_gradgrad": PyTorchMethod(BACKWARD_FILE, BACKWARD_CLASS, "test_inplace_gradgrad", (OP_DB,)),
    "fail_gradgrad": PyTorchMethod(BACKWARD_FILE, BACKWARD_CLASS, "test_fn_fail_gradgrad", (OP_DB, CUSTOM_OP_DB)),
    "fwgrad": PyTorchMethod(FORWARD_FILE, FORWARD_CLASS, "test_forward_mode_AD", (OP_DB,)),
    "fwgrad_bwgrad": PyTorchMethod(FORWARD_FILE, FORWARD_CLASS, "test_fn_fwgrad_bwgrad", (OP_DB,)),
    "inplace_fwgrad": PyTorchMethod(FORWARD_FILE, FORWARD_CLASS, "test_inplace_forward_mode_AD", (OP_DB,)),
}


@dataclass(frozen=True, order=True)
class PyTorchTest:
    """One test of PyTorch's files, as pytest and PyTorch's CI name it."""

    file: str  # test_ops_gradients.py
    classname: str  # TestBwdGradientsCPU
    name: str  # test_fn_grad_sinh_cpu_float64

    @property
    def key(self) -> str:
        """As unittest prints the test and PyTorch's disabled-tests file keys it:
        ``test_fn_grad_sinh_cpu_float64 (__main__.TestBwdGradientsCPU)``."""
        return f"{self.name} (__main__.{self.classname})"

    @property
    def node_id(self) -> str:
        """pytest's node id of the test, relative to the files' folder."""
        return f"{self.file}::{self.classname}::{self.name}"

    def __str__(self) -> str:
        return f"{self.classname}.{self.name}"


def formatted_name(op: str) -> str:
    """``OpInfo.formatted_name`` of the op whose ``full_name`` is ``op``."""
    return op.replace(".", "_")


def device_class(generic: str, device: str = DEVICE) -> str:
    """The class ``instantiate_device_type_tests`` makes of a generic test class for ``device``."""
    return generic + device.upper()


def pytorch_test(check: str, op: str, dtype: str, device: str = DEVICE) -> PyTorchTest:
    """The PyTorch test of check kind ``check`` for the op named ``op`` (its ``full_name``) in
    ``dtype`` (``float64``, ``complex128``) on ``device``."""
    if check not in TESTS:
        raise KeyError(f"no PyTorch test for check kind {check!r} (known: {', '.join(TESTS)})")
    kind = TESTS[check]
    name = f"{kind.method}_{formatted_name(op)}_{device}_{dtype}"
    return PyTorchTest(kind.file, device_class(kind.generic_class, device), name)


def pytorch_test_of(case: CaseId) -> PyTorchTest:
    """The PyTorch test a case (any of its samples) belongs to."""
    return pytorch_test(case.check, case.op, case.dtype)
