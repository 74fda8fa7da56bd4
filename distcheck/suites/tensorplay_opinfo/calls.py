"""One OpInfo sample as a tensorplay gradient check: the converted sample, its gradcheck inputs
and the checked function, made exactly as torch-opinfo makes them for torch
(:mod:`distcheck.suites.torch_opinfo.calls`), on the tensorplay copies of the sample's values.

- The gradcheck inputs are the tensorplay copies of the tensors torch-opinfo's
  :func:`~distcheck.suites.torch_opinfo.calls.gradcheck_inputs` picks, in its order.
- The checked function puts its inputs back where they came from, calls the tensorplay op
  through the translated ``gradcheck_wrapper`` and returns the translated
  ``output_process_fn_grad`` of its output (see :mod:`~distcheck.suites.tensorplay_opinfo.lookup`).
- The gradcheck / gradgradcheck calls of each check kind are torch-opinfo's
  (:func:`~distcheck.suites.torch_opinfo.calls.check_calls`): same options per mode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tensorplay as tp

from distcheck.suites.tensorplay_opinfo import lookup
from distcheck.suites.tensorplay_opinfo.convert import Converter
from distcheck.suites.torch_opinfo.calls import gradcheck_inputs


@dataclass(frozen=True)
class ConvertedSample:
    """A sample's values as tensorplay values, and its gradcheck inputs among them."""

    input: Any
    args: tuple
    kwargs: dict[str, Any]
    inputs: tuple[tp.Tensor, ...]

    @property
    def values(self) -> tuple:
        return self.input, self.args, self.kwargs


def convert(sample) -> ConvertedSample:
    """The sample's values converted (raises :class:`~distcheck.suites.tensorplay_opinfo.convert.Unconvertible`)."""
    converter = Converter()
    first, args, kwargs = converter(sample.input), converter(tuple(sample.args)), converter(dict(sample.kwargs))
    inputs = tuple(converter.tensor_for(x) for x in gradcheck_inputs(sample))
    return ConvertedSample(first, args, kwargs, inputs)


def _requires_grad(x: Any) -> bool:
    return isinstance(x, tp.Tensor) and x.requires_grad


def _is_tensor_list(value: Any) -> bool:
    """torch's ``is_iterable_of_tensors`` for the converted values (a non-empty list or tuple of
    tensors: converted containers keep their type)."""
    return isinstance(value, (list, tuple)) and len(value) > 0 and all(isinstance(x, tp.Tensor) for x in value)


def _recomposed(value: Any, taken) -> Any:
    """``value`` with each tensor that requires grad replaced by the next of ``taken``."""
    if _is_tensor_list(value):
        return [next(taken) if _requires_grad(x) else x for x in value]
    return next(taken) if _requires_grad(value) else value


class TensorplaySampleFunction:
    """``fn(*inputs)``: the tensorplay op on the converted sample with its differentiable
    tensors replaced by ``inputs``, through the ``gradcheck_wrapper``, then
    ``output_process_fn_grad``. ``rebuild``: ``(callable, args)`` that makes this function again
    in another process (how it pickles: its translated helpers do not)."""

    def __init__(self, op, sample, converted: ConvertedSample, rebuild: tuple[Callable, tuple]):
        self.name = op.full_name
        self.op, self.wrapper = lookup.op_callable(op), lookup.wrapper(op)
        self.process = lookup.output_processor(sample)
        self.sample, self.rebuild = converted, rebuild

    def __call__(self, *inputs: tp.Tensor):
        taken = iter(inputs)
        positional = [_recomposed(self.sample.input, taken)]
        positional += [_recomposed(arg, taken) for arg in self.sample.args]
        kwargs = {key: _recomposed(value, taken) for key, value in self.sample.kwargs.items()}
        return self.process(self.wrapper(self.op, *positional, **kwargs))

    def __reduce__(self):
        return self.rebuild

    def __repr__(self) -> str:
        return f"TensorplaySampleFunction({self.name})"
