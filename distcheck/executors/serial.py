"""The serial executor: units run in this process, one at a time, when the reducer asks.

Running lazily in the reducer's order means a failing check stops at its first failure,
as the reference does, and computes nothing after it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

from distcheck.plan.chunking import Whole
from distcheck.plan.subject import Subject
from distcheck.plan.units import Unit, UnitResult, execute


class SerialResults:
    """Units run here when first asked for; comparisons over ``block_bytes`` block by block."""

    def __init__(self, subject: Subject, units: Sequence[Unit], threads: int, block_bytes: float = math.inf):
        self._subject, self._units, self._threads = subject, units, threads
        self._done: dict[int, UnitResult] = {}
        self.blocks = None
        if math.isfinite(block_bytes):
            from distcheck.reduce.blockwise import LocalBlocks

            self.blocks = LocalBlocks(self, block_bytes)

    def get(self, index: int) -> UnitResult:
        if index not in self._done:
            self._done[index] = execute(self._units[index], self._subject, self._threads, f"pid {os.getpid()}")
        return self._done[index]

    def close(self) -> None:
        self._done.clear()


class SerialExecutor:
    """In-process execution. ``threads`` intra-op threads per unit (1, as on Ray workers, so
    that both executors compute bitwise-identical numbers). ``block_bytes``: a comparison
    whose Jacobians, joined, would take more (:func:`~distcheck.plan.comparisons.whole_bytes`)
    is made block by block on the units' results, never joined (same verdicts and messages);
    by default every comparison is joined."""

    name = "serial"
    workers = 1
    policy = Whole()

    def __init__(self, threads: int = 1, block_bytes: float = math.inf):
        self.threads, self.block_bytes = threads, block_bytes

    def submit(self, subject: Subject, units: Sequence[Unit]) -> SerialResults:
        return SerialResults(subject, units, self.threads, self.block_bytes)

    def __repr__(self) -> str:
        budget = "" if math.isinf(self.block_bytes) else f", block_bytes={self.block_bytes:g}"
        return f"SerialExecutor(threads={self.threads}{budget})"
