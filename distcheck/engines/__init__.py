"""Engines: adapters from autodiff libraries to the checker (see :mod:`distcheck.engines.base`).

The engine of a check is chosen from its inputs; engine modules are imported only when a
check needs them, so that ``import distcheck`` does not import torch.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

from distcheck.engines.base import Engine, TensorInfo

# engine name -> (module that defines it, class name, top-level package whose tensors it owns)
_ENGINES = {
    "torch": ("distcheck.engines.torch_engine", "TorchEngine", "torch"),
    "tensorplay": ("distcheck.engines.tensorplay_engine", "TensorplayEngine", "tensorplay"),
    "numpy": ("distcheck.engines.numpy_engine", "NumpyEngine", "numpy"),
}
_loaded: dict[str, Engine] = {}

__all__ = ["Engine", "TensorInfo", "engine_for", "forget", "get_engine"]


def get_engine(name: str) -> Engine:
    """The engine called ``name`` (importing its library on first use)."""
    if name not in _loaded:
        if name not in _ENGINES:
            raise ValueError(f"unknown engine {name!r}; known: {', '.join(_ENGINES)}")
        module, cls, _ = _ENGINES[name]
        _loaded[name] = getattr(importlib.import_module(module), cls)()
    return _loaded[name]


def forget() -> None:
    """Drop the outputs every loaded engine keeps for backward passes (see ``reference_call``)."""
    for engine in _loaded.values():
        engine.forget()


def _tensor_library(value: Any) -> str | None:
    """The engine name whose tensor type ``value`` is, without importing any library."""
    for name, (_, _, package) in _ENGINES.items():
        lib = sys.modules.get(package)
        if lib is None:
            continue
        tensor_type = lib.ndarray if name == "numpy" else getattr(lib, "Tensor", None)
        if tensor_type is not None and isinstance(value, tensor_type):
            return name
    return None


def engine_for(func: Callable, inputs: tuple) -> Engine:
    """The engine of a check: the library of the input tensors (all must agree)."""
    found = {lib for lib in map(_tensor_library, inputs) if lib is not None}
    if len(found) > 1:
        raise TypeError(f"gradcheck inputs mix tensors of several engines: {', '.join(sorted(found))}")
    if not found:
        raise ValueError(
            "gradcheck expects at least one input tensor to require gradient, but none of the inputs "
            "is a tensor (torch.Tensor, tensorplay.Tensor or numpy.ndarray)"
        )
    return get_engine(found.pop())
