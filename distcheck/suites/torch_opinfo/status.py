"""Which OpInfo gradient tests PyTorch runs, skips or expects to fail on a device type (its
``*CPU`` or ``*CUDA`` test classes: the device type is a parameter, ``cpu`` by default).

PyTorch's ``test_ops_gradients.py`` / ``test_ops_fwd_gradients.py`` decide this in three
places, reproduced here in their order:

1. the op's decorators (``DecorateInfo`` entries and plain decorators), applied around the test
   in the order ``instantiate_test`` applies them: ``unittest.skip`` marks, and decorators that
   decide when called (``onlyCUDA``, ``skipCPUIfNoLapack``, ``slowTest``, ...);
2. the skips in the test bodies: ``supports_gradgrad`` (the body's dtype and autograd skips
   concern ops and dtypes this suite does not enumerate: see :func:`checked_dtypes`);
3. ``unittest.expectedFailure`` marks, which only matter if the test was not skipped.

Validated against pytest on torch 2.13 on CPU (all 3,098 generated tests: outcome and reason).
On CUDA the same metadata is read for ``device_type='cuda'`` (``supported_backward_dtypes('cuda')``,
``DecorateInfo(device_type='cuda')``, ``skipCUDAIf...``): it needs no GPU, but the CUDA test
class's own facts (MAGMA, cuDNN) are this machine's.
"""

from __future__ import annotations

import unittest

import torch

from distcheck.suites.base import RUN, SKIPPED, XFAIL
from distcheck.suites.torch_opinfo.database import dtype_name

# check kind -> (test class, test method) in PyTorch's test files
TESTS = {
    "grad": ("TestBwdGradients", "test_fn_grad"),
    "gradgrad": ("TestBwdGradients", "test_fn_gradgrad"),
    "fwgrad": ("TestFwdGradients", "test_forward_mode_AD"),
    "fwgrad_bwgrad": ("TestFwdGradients", "test_fn_fwgrad_bwgrad"),
}
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
    cls_name, test_name = TESTS[check]
    decorated = _decorated(op, cls_name, test_name, dtype, device_type)
    if getattr(decorated, "__unittest_skip__", False):
        return SKIPPED, decorated.__unittest_skip_why__ or "skipped by an OpInfo decorator (no reason given)"
    try:
        decorated(_DeviceTest(device_type))
    except unittest.SkipTest as e:
        return SKIPPED, str(e)
    if check == "gradgrad" and not op.supports_gradgrad:
        return SKIPPED, "Op claims it doesn't support gradgrad. This is not verified."
    if getattr(decorated, "__unittest_expecting_failure__", False):
        return XFAIL, f"OpInfo marks {cls_name}.{test_name} as an expected failure ({dtype_name(dtype)})"
    return RUN, ""


def expects_not_implemented(op, check: str) -> bool:
    """The forward-mode tests of an op without forward AD assert that it raises
    NotImplementedError ("Trying to use forward AD with ... that does not support it")."""
    if check == "fwgrad":
        return not op.supports_forward_ad
    if check == "fwgrad_bwgrad":
        return not op.supports_fwgrad_bwgrad
    return False


def _decorated(op, cls_name: str, test_name: str, dtype: torch.dtype, device_type: str = DEVICE):
    def test(self, **kwargs):
        return None

    # the test's device argument: the test class's primary device (cuda:0 on CUDA)
    params = {"op": op, "dtype": dtype, "device": "cpu" if device_type == "cpu" else f"{device_type}:0"}
    for decorator in op.get_decorators(cls_name, test_name, device_type, dtype, params):
        test = decorator(test)
    return test
