"""Twin cases: one case built as a function of another library and as its torch twin, from the
same numpy values, so that torch.autograd.gradcheck's verdict on the twin is the expected verdict
of distcheck on the library's function (tensorplay, JAX)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tests.parity.cases import Case
from tests.parity.runner import Outcome, run


def values(*shape: int, dtype: str = "float64", seed: int = 0, scale: float = 1.0, offset: float = 0.0) -> np.ndarray:
    rng = np.random.default_rng([seed, len(shape), *shape])
    a = rng.standard_normal(shape)
    if dtype.startswith("complex"):
        a = a + 1j * rng.standard_normal(shape)
    return (a * scale + offset).astype(dtype)


def library(lib) -> str:
    """The catalogue's name of a library module (``jax.numpy`` is "jax")."""
    return lib.__name__.split(".")[0]


def kit(lib):
    return importlib.import_module(f"tests.catalogue.{library(lib)}_functions").KIT


def maker(lib) -> Callable[..., Any]:
    """``t(*shape, dtype=, seed=, requires_grad=, transposed=, ...)``: a tensor of ``lib``."""
    make = kit(lib).tensor

    def t(*shape, requires_grad=True, transposed=False, **kwargs):
        return make(values(*shape, **kwargs), requires_grad=requires_grad, transposed=transposed)

    return t


def custom(lib, name: str) -> Callable:
    """Catalogue entry ``name`` made in ``lib`` (the library, or its torch twin)."""
    return kit(lib).function(name)


@dataclass(frozen=True)
class TwinCase:
    name: str
    build: Callable[[Any, Callable], tuple]  # (lib, t) -> (func, inputs[, extra keyword arguments])
    kind: str = "grad"
    options: dict[str, Any] = field(default_factory=dict)
    torch_says: str = "pass"  # torch's verdict on the twin (asserted: a case cannot silently go stale)
    # distcheck's (verdict, kind) on the library's function where the library differs from torch
    # (its autodiff is wrong, or its semantics differ); None: the same as torch's on the twin
    differs: tuple[str, str] | None = None

    def __str__(self) -> str:
        return self.name

    def case(self, lib) -> Case:
        return Case(self.name, lambda: self.build(lib, maker(lib)), self.kind, self.options)


def run_twin(case: TwinCase, lib, **extra) -> Outcome:
    """The case run by torch.autograd (``lib`` torch) or by distcheck (any other library)."""
    return run(case.case(lib), "torch" if library(lib) == "torch" else "distcheck", **extra)
