"""Sample values from torch to tensorplay, through numpy.

- A strided tensor becomes a tensorplay tensor that holds a copy of its values (never memory
  shared with torch or numpy: ``tp.tensor`` alone would alias its numpy array), with the same
  dtype, shape, strides and ``requires_grad``. A non-contiguous tensor (op_db makes many on
  purpose: 1,481 of the 18,411 float64 gradcheck inputs) is rebuilt as a view with the same
  strides over a copy of the storage span it reads, then detached: a leaf, as torch's is. So is
  an empty tensor (``tp.tensor`` of an empty numpy array has all strides 0, which gradcheck's
  overlap test would reject).
- A torch tensor that appears twice in a sample becomes one tensorplay tensor that appears twice.
- dtypes, layouts and memory formats become tensorplay's of the same name, ``torch.Size`` a
  tuple; numbers, strings, None, slices and Ellipsis stay as they are; lists, tuples and dicts
  are converted item by item.
- Anything else does not convert (:class:`Unconvertible`, whose message says what): sparse
  tensors, torch modules (``PairwiseDistance``), option objects, dtypes tensorplay lacks. The
  suite skips such a sample's cases with that reason.
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np
import tensorplay as tp
import torch

from distcheck.engines.tensorplay_engine import to_tensor

_KEPT_TYPES = (bool, int, float, complex, str, type(None), slice, types.EllipsisType)
_NAMED_TORCH_OBJECTS = (torch.dtype, torch.layout, torch.memory_format)


class Unconvertible(TypeError):
    """A sample value that has no tensorplay counterpart."""


class Converter:
    """Converts the values of one sample (remembering tensors, so that shared ones stay shared)."""

    def __init__(self):
        self._tensors: dict[int, tp.Tensor] = {}

    def tensor_for(self, t: torch.Tensor) -> tp.Tensor:
        """The tensorplay tensor that ``t`` became (``t`` must have been converted)."""
        return self._tensors[id(t)]

    def __call__(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            if id(value) not in self._tensors:
                self._tensors[id(value)] = tensor(value)
            return self._tensors[id(value)]
        if isinstance(value, torch.Size):
            return tuple(value)
        if isinstance(value, (list, tuple)):
            return type(value)(self(item) for item in value)
        if isinstance(value, dict):
            return {key: self(item) for key, item in value.items()}
        if isinstance(value, _NAMED_TORCH_OBJECTS):
            return named_object(value)
        if isinstance(value, _KEPT_TYPES):
            return value
        raise Unconvertible(f"a {type(value).__module__}.{type(value).__qualname__} has no tensorplay counterpart")


def named_object(value: Any) -> Any:
    """tensorplay's dtype, layout or memory format of the same name as torch's ``value``."""
    name = str(value).removeprefix("torch.")
    found = getattr(tp, name, None)
    if found is None:
        raise Unconvertible(f"tensorplay has no {type(value).__name__} {name}")
    return found


def tensor(t: torch.Tensor) -> tp.Tensor:
    """A tensorplay copy of ``t``: same dtype, shape, strides (a leaf view of a copied storage
    span when not contiguous) and ``requires_grad``."""
    if t.layout != torch.strided:
        raise Unconvertible(f"a {str(t.layout).removeprefix('torch.')} tensor (tensorplay gets dense tensors only)")
    dtype = named_object(t.dtype)
    try:
        values = t.detach().resolve_conj().resolve_neg().numpy()
    except TypeError as e:  # a dtype numpy lacks (bfloat16...)
        raise Unconvertible(f"a {t.dtype} tensor does not convert through numpy: {e}") from None
    if t.is_contiguous() and t.numel() > 0:
        converted = to_tensor(values, dtype=dtype)
    else:  # tensorplay gives empty tensors made from numpy zero strides: use torch's for them too
        span = np.zeros(1 + sum(max(n - 1, 0) * s for n, s in zip(t.shape, t.stride())), dtype=values.dtype)
        strides = tuple(s * values.itemsize for s in t.stride())
        np.lib.stride_tricks.as_strided(span, t.shape, strides)[...] = values
        converted = to_tensor(span, dtype=dtype).as_strided(tuple(t.shape), tuple(t.stride())).detach()
    return converted.requires_grad_(t.requires_grad)
