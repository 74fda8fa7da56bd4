"""One OpInfo sample as gradient checks, exactly as ``TestGradients._check_helper`` (in torch's
``testing/_internal/common_utils.py``) makes them.

- The gradcheck inputs are the tensors that require grad among the sample's input (each
  tensor of it when it is a list of tensors), positional args and kwarg values, in that order.
  Everything else (index tensors, targets without grad, numbers, lists in args) is a constant.
- The checked function puts its inputs back where they came from, calls the op (or, for the
  in-place check kinds, its in-place variant on a clone of its first argument, as
  ``TestGradients._get_safe_inplace`` does) through its ``gradcheck_wrapper`` and returns
  ``sample.output_process_fn_grad(output)``.
- ``test_inplace_grad`` of an op that claims no in-place autograd checks no gradient: each
  sample must make ``inplace(sample).sum().backward()`` raise (a ``call`` of
  :class:`InplaceBackward`; the test hands the SampleInput itself to the clone-making variant,
  which has no ``clone``, so every sample raises AttributeError there, in PyTorch as here).
- The options of each check kind are those the PyTorch tests pass through the test-suite
  wrappers of gradcheck / gradgradcheck, whose defaults are ``check_batched_grad=True`` and
  ``fast_mode=True`` (``False`` in the slow-gradcheck CI job) for the options an OpInfo leaves
  at None: an explicit ``gradcheck_fast_mode`` beats the mode.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from itertools import chain
from typing import Any

import torch
from torch.testing._internal.common_utils import is_iterable_of_tensors

from distcheck.suites.base import CheckCall, ExpectedError

# what the forward-mode tests of an op without forward AD assert (assertRaisesRegex)
FORWARD_AD_UNSUPPORTED = ExpectedError(
    NotImplementedError, r"Trying to use forward AD with .* that does not support it"
)
# what test_fn_fail_gradgrad asserts of gradgradcheck (assertRaisesRegex)
GRADGRAD_UNSUPPORTED = ExpectedError(RuntimeError, r"derivative for .* is not implemented")
# what test_inplace_grad asserts of an op claiming no in-place autograd (assertRaises(Exception))
INPLACE_AUTOGRAD_UNSUPPORTED = ExpectedError(Exception, "")


def _requires_grad(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.requires_grad


def gradcheck_inputs(sample) -> tuple[torch.Tensor, ...]:
    """The sample's tensors that require grad: the differentiable inputs of its checks."""
    if is_iterable_of_tensors(sample.input):
        values = chain(sample.input, sample.args, sample.kwargs.values())
    else:
        values = chain((sample.input,), sample.args, sample.kwargs.values())
    return tuple(x for x in values if _requires_grad(x))


def safe_inplace(inplace_variant):
    """``TestGradients._get_safe_inplace``: the in-place variant on a clone of its first
    argument (a leaf that requires grad cannot be modified in place)."""

    @functools.wraps(inplace_variant)
    def _fn(t, *args, **kwargs):
        return inplace_variant(t.clone(), *args, **kwargs)

    return _fn


class SampleFunction:
    """``fn(*inputs)``: the op (``inplace``: its in-place variant, see :func:`safe_inplace`)
    called on the sample with its differentiable tensors replaced by ``inputs`` (in
    :func:`gradcheck_inputs` order), through the op's ``gradcheck_wrapper``, then
    ``output_process_fn_grad``. Pickled with the op's name, not the OpInfo object."""

    def __init__(self, op, sample, inplace: bool = False):
        self.op, self.sample, self.inplace = op, sample, inplace
        self.variant = safe_inplace(op.get_inplace()) if inplace else op.get_op()

    def __call__(self, *inputs: torch.Tensor):
        taken = iter(inputs)
        positional = [_recomposed(self.sample.input, taken)]
        positional += [_recomposed(arg, taken) for arg in self.sample.args]
        kwargs = {key: _recomposed(value, taken) for key, value in self.sample.kwargs.items()}
        output = self.op.gradcheck_wrapper(self.variant, *positional, **kwargs)
        if self.sample.output_process_fn_grad is not None:
            return self.sample.output_process_fn_grad(output)
        return output

    def __reduce__(self):
        return _sample_function, (self.op.full_name, self.sample, self.inplace)

    def __repr__(self) -> str:
        return f"SampleFunction({self.op.full_name}{', in place' if self.inplace else ''})"


def _sample_function(op_name: str, sample, inplace: bool = False) -> SampleFunction:
    from distcheck.suites.torch_opinfo.database import op_named

    return SampleFunction(op_named(op_name), sample, inplace)


class InplaceBackward:
    """``fn(*inputs)`` of test_inplace_grad for an op that claims no in-place autograd:
    ``inplace(sample).sum().backward()`` exactly as the test writes it (``inputs`` unused),
    which must raise."""

    def __init__(self, op, sample):
        self.op, self.sample = op, sample

    def __call__(self, *inputs: torch.Tensor) -> None:
        result = safe_inplace(self.op.get_inplace())(self.sample)
        result.sum().backward()

    def __reduce__(self):
        return _inplace_backward, (self.op.full_name, self.sample)

    def __repr__(self) -> str:
        return f"InplaceBackward({self.op.full_name})"


class SamplesUntilRaise:
    """``fn(*inputs)`` of a test whose ``assertRaisesRegex`` wraps its whole loop over the op's
    samples (test_fn_fail_gradgrad; test_forward_mode_AD, test_inplace_forward_mode_AD and
    test_fn_fwgrad_bwgrad of an op without forward AD): each sample's checks of check kind
    ``check`` (:func:`check_calls`; distcheck's, serial), sample by sample in order, each call
    after ``seed(index)``, until one raises (``inputs`` unused). The in-place kinds check the
    in-place variant (:class:`SampleFunction`) and leave out samples that broadcast their input,
    as ``_check_helper`` does. It returns if none raises: the test then fails. One case per test
    (its sample 0): a sample that does not raise is not a failure if a later one does."""

    def __init__(self, op, samples: Sequence, check: str, mode: str, seed, inplace: bool = False):
        self.op, self.samples, self.check, self.mode = op, list(samples), check, mode
        self.seed, self.inplace = seed, inplace

    def __call__(self, *inputs: torch.Tensor) -> None:
        import distcheck
        from distcheck.executors.serial import SerialExecutor

        calls = check_calls(self.op, self.check, self.mode)
        for index, sample in enumerate(self.samples):
            if self.inplace and sample.broadcasts_input:
                continue
            function, checked = SampleFunction(self.op, sample, self.inplace), gradcheck_inputs(sample)
            assert_grad_free(checked, f"sample {index}")
            for call in calls:
                self.seed(index)
                check = getattr(distcheck, call.function)  # gradcheck or gradgradcheck
                check(function, checked, executor=SerialExecutor(), **call.kwargs)

    def __repr__(self) -> str:
        variant = ", in place" if self.inplace else ""
        return f"SamplesUntilRaise({self.op.full_name}{variant}, {self.check}, {len(self.samples)} samples)"


def _inplace_backward(op_name: str, sample) -> InplaceBackward:
    from distcheck.suites.torch_opinfo.database import op_named

    return InplaceBackward(op_named(op_name), sample)


def _recomposed(value: Any, taken) -> Any:
    """``value`` with each tensor that requires grad replaced by the next of ``taken``."""
    if is_iterable_of_tensors(value):
        return [next(taken) if _requires_grad(x) else x for x in value]
    return next(taken) if _requires_grad(value) else value


def _or_default(value: Any, default: Any) -> Any:
    """The test-suite wrappers' rule: an option left at None takes the wrapper's default."""
    return default if value is None else value


def check_calls(op, check: str, mode: str) -> tuple[CheckCall, ...]:
    """The gradcheck / gradgradcheck calls of one sample for check kind ``check`` in ``mode``
    (a ``call`` of the function itself for test_inplace_grad of an op without in-place
    autograd). The in-place kinds make their function's checks (test_fn_fail_gradgrad:
    test_fn_gradgrad's), but for the batched forward-grad check of ``inplace_fwgrad``."""
    if check == "inplace_grad" and not op.supports_inplace_autograd:
        return (CheckCall("call", {}),)
    check = {"inplace_grad": "grad", "inplace_gradgrad": "gradgrad", "fail_gradgrad": "gradgrad"}.get(check, check)
    common = {
        "check_grad_dtypes": True,
        "nondet_tol": op.gradcheck_nondet_tol,
        "fast_mode": _or_default(op.gradcheck_fast_mode, mode == "fast"),
    }
    if check == "grad":  # test_fn_grad
        kwargs = {
            **common,
            "check_batched_grad": _or_default(op.check_batched_grad, True),
            "check_forward_ad": False,
            "check_backward_ad": True,
            "check_undefined_grad": True,
            "check_batched_forward_grad": False,
        }
        return (CheckCall("gradcheck", kwargs),)
    if check in ("fwgrad", "inplace_fwgrad"):  # test_forward_mode_AD, test_inplace_forward_mode_AD
        batched = op.check_inplace_batched_forward_grad if check == "inplace_fwgrad" else op.check_batched_forward_grad
        kwargs = {
            **common,
            "check_batched_grad": False,
            "check_forward_ad": True,
            "check_backward_ad": False,
            "check_undefined_grad": True,
            "check_batched_forward_grad": bool(batched),
        }
        return (CheckCall("gradcheck", kwargs),)
    # test_fn_gradgrad and test_fn_fwgrad_bwgrad: gradgradcheck with contiguous, then
    # non-contiguous random grad-outputs
    extra: dict[str, Any] = {"check_batched_grad": _or_default(op.check_batched_gradgrad, True)}
    if check == "fwgrad_bwgrad":
        extra = {
            "check_fwd_over_rev": True,
            "check_rev_over_rev": False,
            "check_batched_grad": False,
            "check_undefined_grad": False,
        }
    return tuple(
        CheckCall("gradgradcheck", {**common, **extra, "gen_non_contig_grad_outputs": noncontiguous})
        for noncontiguous in (False, True)
    )


def assert_grad_free(inputs: Sequence[torch.Tensor], where: str) -> None:
    """Raise AssertionError if an input already has a ``.grad`` (PyTorch's test helper asserts
    there is none: it would mean a tensor is shared between samples); ``where``: whose inputs."""
    if any(x.grad is not None for x in inputs):
        raise AssertionError(
            f"{where}: a sampled input has a gradient before running autograd: a tensor is reused "
            "across SampleInputs (PyTorch's test helper asserts the same)"
        )
