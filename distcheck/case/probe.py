"""A benchmark's hook around each piece of work a process runs (a case, a split case on its
coordinator, a chunk or block job of a split case): ``$DISTCHECK_PROBE`` names it
(``MODULE:NAME``, a :class:`Probe`), read once per process. Unset, nothing is measured and no
piece calls anything (``benchmarks/memory_probe.py`` is one: each piece's memory).
"""

from __future__ import annotations

import functools
import importlib
import os
from contextlib import AbstractContextManager
from typing import Any, Protocol

VARIABLE = "DISTCHECK_PROBE"


class Piece(Protocol):
    def inputs_of(self, value: Any) -> None:
        """The piece's case has inputs ``value`` (arrays, nested in tuples, lists and dicts)."""


class Probe(Protocol):
    def piece(self, kind: str, what: str) -> AbstractContextManager[Piece]:
        """Measures the ``with`` body: a piece of ``kind`` ("case", "split case", "chunk", "block job")."""

    def waiting(self) -> AbstractContextManager[None]:
        """The ``with`` body of a running piece only waits for other processes' results."""


@functools.cache
def hook() -> Probe | None:
    """This process's probe (None: no ``$DISTCHECK_PROBE``)."""
    spec = os.environ.get(VARIABLE)
    if not spec:
        return None
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)
