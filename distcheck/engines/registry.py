"""Which engine checks what: engines by name, and the engine of a check's inputs.

Engine modules are imported only when a check needs them, so that ``import distcheck`` does
not import torch. Adding an engine: one entry in :data:`_ENGINES`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distcheck.engines.base import Engine

# engine name -> (module that defines it, class name, top-level package, its array type's attribute)
_ENGINES = {
    "torch": ("distcheck.engines.torch_engine", "TorchEngine", "torch", "Tensor"),
    "tensorplay": ("distcheck.engines.tensorplay_engine", "TensorplayEngine", "tensorplay", "Tensor"),
    "numpy": ("distcheck.engines.numpy_engine", "NumpyEngine", "numpy", "ndarray"),
    "jax": ("distcheck.engines.jax_engine", "JaxEngine", "jax", "Array"),
}
_loaded: dict[str, Engine] = {}


def get_engine(name: str) -> Engine:
    """The engine called ``name`` (importing its library on first use)."""
    engine = _loaded.get(name)
    if engine is None:
        if name not in _ENGINES:
            raise ValueError(f"unknown engine {name!r}; known: {', '.join(_ENGINES)}")
        module, cls, _, _ = _ENGINES[name]
        engine = _loaded[name] = getattr(importlib.import_module(module), cls)()
    return engine


def engine_of(value: Any) -> str | None:
    """The name of the engine whose array type ``value`` is, without importing any library."""
    for name, (_, _, package, attribute) in _ENGINES.items():
        lib = sys.modules.get(package)
        if lib is None:
            continue
        array_type = getattr(lib, attribute, None)
        if array_type is not None and isinstance(value, array_type):
            return name
    return None


def engine_for(func: Callable, inputs: tuple) -> Engine:
    """The engine of a check: the library of the inputs that require gradients. Arrays of other
    libraries are constants that pass through untouched (as torch's gradcheck hands a numpy
    array to the function); inputs of two libraries that both require gradients cannot be checked."""
    found: dict[str, list[int]] = {}
    for position, value in enumerate(inputs):
        name = engine_of(value)
        if name is not None:
            found.setdefault(name, []).append(position)
    if not found:
        raise ValueError(
            "gradcheck expects at least one input tensor to require gradient, but none of the inputs "
            "is a tensor (torch.Tensor, tensorplay.Tensor, jax.Array or numpy.ndarray)"
        )
    if len(found) == 1:
        return get_engine(next(iter(found)))
    differentiated = [
        name
        for name, positions in found.items()
        if any(get_engine(name).requires_grad(inputs[p], func, p) for p in positions)
    ]
    if len(differentiated) > 1:
        raise TypeError(
            "gradcheck inputs of several engines require gradients: "
            f"{', '.join(sorted(differentiated))}; one check differentiates one engine's tensors"
        )
    return get_engine(differentiated[0] if differentiated else next(iter(found)))
