"""One catalogue of test functions for every library (see :mod:`tests.catalogue.functions`).

``function(library, name)`` is catalogue entry ``name`` as a callable of ``library``'s tensors
("torch", "tensorplay" or "jax"); the modules ``torch_functions``, ``tensorplay_functions`` and
``jax_functions`` publish them by name (torch and tensorplay as ``autograd.Function`` classes).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable


def function(library: str, name: str) -> Callable:
    """Catalogue entry ``name`` made in ``library`` (importing the library's module on first use)."""
    return importlib.import_module(f"tests.catalogue.{library}_functions").KIT.function(name)
