"""The reference call as a scope: one call of the checked function whose outputs (and graph)
every backward pass and check of a gradcheck differentiates, as torch's gradcheck does — and,
for a function with complex outputs, one call of each part's function beside it.

Work that checks a function opens a scope where it starts (:func:`reference_scope`: a check on
the driver, a task on a worker, a cost measurement); what the scope keeps goes when it closes,
so nothing has to remember to clear it. Only engines with :attr:`Engine.shares_reference` keep
anything (torch); for the others a reference call is a plain call. A call outside any scope
(tests, interactive use) is kept in the thread's default scope, which ``Engine.forget`` empties.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from distcheck.engines.base import Engine


class _Kept:
    """What a scope keeps, as (func, inputs, input versions, outputs) entries: the latest call
    of the scope's first function (a check's own: its auxiliary checks differentiate that call
    after the real and imaginary parts of complex outputs were checked on calls of their own,
    as torch's gradcheck keeps its first call's outputs for them) and the latest call of any
    other function. Never more than two graphs."""

    __slots__ = ("first", "other")

    def __init__(self) -> None:
        self.first: tuple | None = None
        self.other: tuple | None = None

    def find(self, func: Callable, inputs: tuple, versions: tuple) -> tuple | None:
        """The kept outputs of ``func`` at these very input objects, unchanged since; else None."""
        for entry in (self.first, self.other):
            if (
                entry is not None
                and entry[0] is func
                and len(entry[1]) == len(inputs)
                and all(a is b for a, b in zip(entry[1], inputs))
                and entry[2] == versions
            ):
                return entry[3]
        return None

    def slot(self, func: Callable) -> str:
        """Where a new call of ``func`` is kept."""
        return "first" if self.first is None or self.first[0] is func else "other"


_scope: ContextVar[_Kept | None] = ContextVar("distcheck_reference_scope", default=None)
_default = threading.local()  # .kept: the thread's default scope, for calls outside any scope


@contextmanager
def reference_scope() -> Iterator[None]:
    """A scope for reference calls: what they keep inside it is dropped when it closes."""
    token = _scope.set(_Kept())
    try:
        yield
    finally:
        _scope.reset(token)


def _current() -> _Kept:
    kept = _scope.get()
    if kept is None:
        kept = getattr(_default, "kept", None)
        if kept is None:
            kept = _default.kept = _Kept()
    return kept


def forget_default() -> None:
    """Empty this thread's default scope (what reference calls outside any scope keep)."""
    _default.kept = None


def reference_call(engine: Engine, func: Callable, inputs: tuple) -> tuple:
    """The outputs of ``func(*inputs)`` as :meth:`Engine.call` gives them, shared within the
    scope: the same function and input objects, unchanged since (:meth:`Engine.version`), get
    the kept outputs; anything else is called afresh, in place of the kept call of its slot
    (:class:`_Kept`). Users of a kept graph must retain it. Never for perturbed inputs: finite
    differences restore what they move, and torch's version counters see in-place changes."""
    if not engine.shares_reference:
        return engine.call(func, inputs)
    kept = _current()
    versions = tuple(engine.version(x) for x in inputs)
    outputs = kept.find(func, inputs, versions)
    if outputs is not None:
        return outputs
    slot = kept.slot(func)
    setattr(kept, slot, None)  # the graph it replaces goes first
    outputs = engine.call(func, inputs)
    setattr(kept, slot, (func, inputs, versions, outputs))
    return outputs
