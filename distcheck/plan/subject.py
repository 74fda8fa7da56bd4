"""What a check's work units run against: the engine, functions and inputs, shipped once."""

from __future__ import annotations

import sys
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
        # the flags travel alongside and are restored on arrival. A torch view made in no-grad
        # mode of a tensor that requires grad gets no gradient where it is (its Jacobian is
        # zero), but would arrive as a leaf that gets one: it is made such a view again.
        flags = tuple(getattr(x, "requires_grad", None) is True for x in self.inputs)
        return _arriving_variant, (self.func, self.inputs, flags, _no_grad_views(self.inputs))


def _no_grad_views(inputs: tuple) -> tuple[int, ...]:
    if "torch" not in sys.modules:  # no torch tensor among the inputs
        return ()
    from distcheck.engines.torch_tensors import is_no_grad_view

    return tuple(k for k, x in enumerate(inputs) if is_no_grad_view(x))


def _arriving_variant(
    func: Callable, inputs: tuple, requires_grad: tuple[bool, ...], no_grad_views: tuple[int, ...] = ()
) -> Variant:
    for x, flag in zip(inputs, requires_grad):
        if flag and not x.requires_grad:
            x.requires_grad_()
    if no_grad_views:
        from distcheck.engines.torch_tensors import as_no_grad_view

        inputs = tuple(as_no_grad_view(x) if k in no_grad_views else x for k, x in enumerate(inputs))
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
