"""What a check's work units run against: the engine, functions and inputs, shipped once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Variant:
    """One function and the inputs it is checked at.

    A check has several variants: the function itself, the real and imaginary parts of its
    complex outputs, and so on. Units name the variant they run by key.
    """

    func: Callable
    inputs: tuple


@dataclass
class Subject:
    """Everything units need, sent to workers once per check (never once per unit).

    ``data`` holds arrays that units share (random vectors, grad-outputs), by key.
    ``costs`` is what the planner measured for its chunking policy (a ``planner.Costs``: one
    evaluation, one backward pass), if it did: executors use it to group small units into tasks.
    """

    engine: str
    variants: dict[str, Variant]
    data: dict[str, Any] = field(default_factory=dict)
    costs: Any = None
