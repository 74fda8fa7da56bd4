"""What a check's work units run against: the engine, functions and inputs, shipped once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from distcheck.engines.registry import EngineTicket
from distcheck.kinds import VariantKey


@dataclass(frozen=True)
class Variant:
    """One function and the inputs it is checked at.

    A check has several variants: the function itself, the real and imaginary parts of its
    complex outputs, and so on. Units name the variant they run by key.
    """

    func: Callable
    inputs: tuple

    def __reduce__(self):
        # Some tensors lose requires_grad when pickled (torch 2.13's sparse COO tensors do):
        # the flags travel alongside and are restored on arrival.
        flags = tuple(getattr(x, "requires_grad", None) is True for x in self.inputs)
        return _arriving_variant, (self.func, self.inputs, flags)


def _arriving_variant(func: Callable, inputs: tuple, requires_grad: tuple[bool, ...]) -> Variant:
    for x, flag in zip(inputs, requires_grad):
        if flag and not x.requires_grad:
            x.requires_grad_()
    return Variant(func, inputs)


@dataclass
class Subject:
    """Everything units need, sent to workers once per check (never once per unit).

    ``data`` holds arrays that units share (random vectors, grad-outputs), by key.
    ``costs`` is what the planner measured for its chunking policy (a ``planner.Costs``: one
    evaluation, one backward pass), if it did: executors use it to group small units into tasks.
    """

    engine: str
    variants: dict[VariantKey, Variant]
    data: dict[str, Any] = field(default_factory=dict)
    costs: Any = None

    def __reduce__(self):
        # The engine travels first, as a ticket: a worker registers it and restores its state
        # (JAX's 64-bit mode) before it unpickles the inputs, which depend on that state.
        return Subject, (EngineTicket(self.engine), self.variants, self.data, self.costs)
