"""A function's result as a tuple (what checked functions return: a value, a tuple or a list)."""

from __future__ import annotations

from typing import Any


def as_tuple(x: Any) -> tuple:
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)
