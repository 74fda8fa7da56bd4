"""An OpInfo's op, its ``gradcheck_wrapper`` and a sample's ``output_process_fn_grad`` as
tensorplay callables.

- **The op exists** when the OpInfo's ``name`` (never ``full_name``: a variant such as
  ``div.floor_rounding`` is ``div`` called with other samples) resolves in tensorplay: as a
  dotted path from the ``tensorplay`` module (``nn.functional.conv2d`` is
  ``tensorplay.nn.functional.conv2d``), or, for a name without dots, as an attribute of
  ``tensorplay.Tensor`` (methods such as ``__radd__`` or ``double``, properties such as ``T``).
  Otherwise its cases are skipped: "tensorplay has no X".
- **The callable**: when the OpInfo's ``op`` is torch's function or method of that name (most
  ops), or not Python code (an ATen overload), it is tensorplay's of the same name. When it is
  another Python function (``lambda weight, idx: torch.nn.functional.embedding(idx, weight)``,
  ``lambda x: x.T``, the seeded random ops), it is that very function translated to tensorplay
  (:mod:`~distcheck.suites.tensorplay_opinfo.translate`), so that the samples get the argument
  order they were written for.
- ``gradcheck_wrapper`` and ``output_process_fn_grad`` are always Python functions of torch's
  test code: they are translated too (the default wrapper and the identity have nothing to
  change). Of the custom wrappers, ctc_loss's ``log_softmax(dim=2)`` and the triangular ones
  translate as they are; ``wrapper_set_seed`` and the Hermitian-input wrapper
  (``input + input.mH``) have tensorplay versions
  (:mod:`~distcheck.suites.tensorplay_opinfo.helpers`); the masked ops' wrappers call
  ``torch.masked``, which tensorplay lacks (as it lacks the masked ops themselves). All the
  output processings translate; those that read ``.mH`` of an output (``svd``'s) then fail on
  tensorplay, whose ``mH`` is a method.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

import tensorplay as tp
import torch

from distcheck.suites.tensorplay_opinfo.translate import MissingAttribute, Untranslatable, resolve, translate


@functools.cache
def tensorplay_attribute(name: str) -> Any:
    """What an OpInfo ``name`` is in tensorplay: ``tensorplay.<name>``, else (for a name
    without dots) ``tensorplay.Tensor.<name>``; None if neither exists."""
    try:
        return resolve(name)
    except MissingAttribute:
        pass
    if "." not in name:
        try:
            return resolve(name, tp.Tensor)
        except MissingAttribute:
            pass
    return None


def missing_reason(op) -> str | None:
    """Why ``op`` cannot run on tensorplay, if it cannot: "tensorplay has no X", or what its
    Python op or ``gradcheck_wrapper`` needs that tensorplay lacks."""
    if tensorplay_attribute(op.name) is None:
        return f"tensorplay has no {op.name}"
    try:
        op_callable(op)
        wrapper(op)
    except Untranslatable as e:
        return str(e)
    return None


def _translated(function: Callable, what: str) -> Callable:
    try:
        return translate(function)
    except Untranslatable as e:
        raise Untranslatable(f"{what}: {e}") from None


# an OpInfo's op and wrapper are the same objects all along: translated once per process (the
# output_process_fn_grad of a sample is often a closure made for that sample: not cached)
_translated_once = functools.cache(_translated)


def _is_torch_namesake(op) -> bool:
    """Whether the OpInfo's op is torch's function (or Tensor method) called ``op.name``."""
    for root in (torch, torch.Tensor):
        try:
            if resolve(op.name, root) is op.op:
                return True
        except MissingAttribute:
            pass
    return False


def op_callable(op) -> Callable:
    """The tensorplay callable of ``op`` (raises :class:`Untranslatable`)."""
    if isinstance(op.op, types.FunctionType) and not _is_torch_namesake(op):
        return _translated_once(op.op, f"the OpInfo's op of {op.name} is Python code that tensorplay cannot run")
    found = tensorplay_attribute(op.name)
    if not callable(found):
        raise Untranslatable(f"tensorplay has no callable {op.name} (tensorplay's is a {type(found).__name__})")
    return found


def wrapper(op) -> Callable:
    """The tensorplay version of ``op.gradcheck_wrapper`` (raises :class:`Untranslatable`)."""
    return _translated_once(op.gradcheck_wrapper, f"the gradcheck_wrapper of {op.name} cannot run on tensorplay")


def output_processor(sample) -> Callable:
    """The tensorplay version of the sample's ``output_process_fn_grad`` (raises
    :class:`Untranslatable`)."""
    process = sample.output_process_fn_grad
    if process is None:
        return _identity
    return _translated(process, "the sample's output_process_fn_grad cannot run on tensorplay")


def _identity(output: Any) -> Any:
    return output
