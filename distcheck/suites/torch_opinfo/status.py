"""Which OpInfo gradient tests PyTorch runs, skips or expects to fail on a device type (its
``*CPU`` or ``*CUDA`` test classes: the device type is a parameter, ``cpu`` by default).

PyTorch's ``test_ops_gradients.py`` / ``test_ops_fwd_gradients.py`` decide this in three
places, reproduced here in their order:

1. the op's decorators (``DecorateInfo`` entries and plain decorators), applied around the test
   in the order ``instantiate_test`` applies them: ``unittest.skip`` marks, and decorators that
   decide when called (``onlyCUDA``, ``skipCPUIfNoLapack``, ``slowTest``, ...);
2. the skips in the test bodies (:func:`body_skip`: ``supports_gradgrad``, the in-place
   variant and ``supports_inplace_autograd``; the body's dtype and autograd skips concern ops
   and dtypes this suite does not enumerate: see :func:`checked_dtypes`);
3. ``unittest.expectedFailure`` marks, which only matter if the test was not skipped.

Validated against pytest on torch 2.13 on CPU (all 3,098 generated tests: outcome and reason).
On CUDA the same metadata is read for ``device_type='cuda'`` (``supported_backward_dtypes('cuda')``,
``DecorateInfo(device_type='cuda')``, ``skipCUDAIf...``): it needs no GPU, but the CUDA test
class's own facts (MAGMA, cuDNN) are this machine's.

Each test is instantiated over its own op lists (``pytorch_names.TESTS``): an op outside them has no
such test at all (:func:`has_test`).
"""

from __future__ import annotations

import unittest

import torch

from distcheck.suites.base import RUN, SKIPPED, XFAIL, ExpectedError
from distcheck.suites.torch_opinfo.calls import (
    FORWARD_AD_UNSUPPORTED,
    GRADGRAD_UNSUPPORTED,
    INPLACE_AUTOGRAD_UNSUPPORTED,
)
from distcheck.suites.torch_opinfo.database import database_of, dtype_name
from distcheck.suites.torch_opinfo.pytorch_names import TESTS

# check kinds whose checked function is the op's in-place variant (on a clone of its input)
INPLACE_CHECKS = ("inplace_grad", "inplace_gradgrad", "inplace_fwgrad")
DEVICE = "cpu"


class _DeviceTest:
    """What device-type decorators read from the test instance when called: its device type,
    and on CUDA what ``CUDATestBase.setUpClass`` finds (``skipCUDAIfNoMagma`` and
    ``skipCUDAIfNoCudnn`` read ``no_magma`` / ``no_cudnn``)."""

    precision = 0.0
    rel_tol = 0.0

    def __init__(self, device_type: str = DEVICE):
        self.device_type = device_type
        if device_type == "cuda":
            self.no_magma = not torch.cuda.has_magma
            self.no_cudnn = not (torch.backends.cudnn.enabled and torch.backends.cudnn.is_available())

    def skipTest(self, reason: str) -> None:  # noqa: N802 (unittest's name)
        raise unittest.SkipTest(reason)


def has_autograd(op) -> bool:
    return bool(op.supports_autograd or op.supports_forward_ad)


def checked_dtypes(op, dtypes: tuple[torch.dtype, ...], device_type: str = DEVICE) -> list[torch.dtype]:
    """The dtypes (of ``dtypes``) whose gradients PyTorch checks for ``op`` on ``device_type``:
    supported, with backward support (PyTorch generates tests for the others only to skip them)."""
    backward = op.supported_backward_dtypes(device_type)
    return [d for d in dtypes if d in op.supported_dtypes(device_type) and d in backward]


def pytorch_status(op, check: str, dtype: torch.dtype, device_type: str = DEVICE) -> tuple[str, str]:
    """``(status, reason)`` of the PyTorch test of ``check`` for ``op`` in ``dtype`` on
    ``device_type``: ``run`` (reason empty), ``skipped`` or ``xfail``."""
    cls_name, test_name = TESTS[check].generic_class, TESTS[check].method
    decorated = _decorated(op, cls_name, test_name, dtype, device_type)
    if getattr(decorated, "__unittest_skip__", False):
        return SKIPPED, decorated.__unittest_skip_why__ or "skipped by an OpInfo decorator (no reason given)"
    try:
        decorated(_DeviceTest(device_type))
    except unittest.SkipTest as e:
        return SKIPPED, str(e)
    skip = body_skip(op, check)
    if skip is not None:
        return SKIPPED, skip
    if getattr(decorated, "__unittest_expecting_failure__", False):
        return XFAIL, f"OpInfo marks {cls_name}.{test_name} as an expected failure ({dtype_name(dtype)})"
    return RUN, ""


def has_test(op, check: str) -> bool:
    """Whether PyTorch's test of ``check`` is instantiated for ``op`` (its op lists hold it)."""
    return database_of(op) in TESTS[check].databases


def body_skip(op, check: str) -> str | None:
    """The reason the body of ``check``'s test skips ``op`` with (None: it does not)."""
    if check == "gradgrad" and not op.supports_gradgrad:
        return "Op claims it doesn't support gradgrad. This is not verified."
    if check == "fail_gradgrad" and op.supports_gradgrad:
        return "Skipped! Operation does support gradgrad"
    if check == "inplace_grad" and not op.inplace_variant:
        return "Op has no inplace variant!"
    if check in ("inplace_gradgrad", "inplace_fwgrad") and not (op.inplace_variant and op.supports_inplace_autograd):
        return "Skipped! Operation does not support inplace autograd."
    return None


def expected_error(op, check: str) -> ExpectedError | None:
    """What a sample of ``check``'s test of ``op`` must raise (None: its checks must pass): an op
    that claims no in-place autograd (test_inplace_grad), no second derivatives
    (test_fn_fail_gradgrad) or no forward AD (the forward-mode tests) must say so."""
    if check == "inplace_grad" and not op.supports_inplace_autograd:
        return INPLACE_AUTOGRAD_UNSUPPORTED
    if check == "fail_gradgrad":
        return GRADGRAD_UNSUPPORTED
    if check in ("fwgrad", "inplace_fwgrad") and not op.supports_forward_ad:
        return FORWARD_AD_UNSUPPORTED
    if check == "fwgrad_bwgrad" and not op.supports_fwgrad_bwgrad:
        return FORWARD_AD_UNSUPPORTED
    return None


def until_raise(op, check: str) -> bool:
    """Whether ``check``'s test of ``op`` asserts its raise around its whole loop over the
    samples (test_fn_fail_gradgrad; the forward-mode tests of an op without forward AD), so that
    it passes at the first sample that raises: one case (its sample 0) runs the samples in turn
    (:class:`.calls.SamplesUntilRaise`). test_inplace_grad asserts its raise sample by sample."""
    return expected_error(op, check) in (GRADGRAD_UNSUPPORTED, FORWARD_AD_UNSUPPORTED)


def _decorated(op, cls_name: str, test_name: str, dtype: torch.dtype, device_type: str = DEVICE):
    def test(self, **kwargs):
        return None

    # the test's device argument: the test class's primary device (cuda:0 on CUDA)
    params = {"op": op, "dtype": dtype, "device": "cpu" if device_type == "cpu" else f"{device_type}:0"}
    for decorator in op.get_decorators(cls_name, test_name, device_type, dtype, params):
        test = decorator(test)
    return test
