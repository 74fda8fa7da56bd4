"""What a check's slow-mode Jacobian comparisons were decided on: batched blocks, or element by
element (torch's loops), and why."""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from distcheck.kinds import Fallback


@dataclass
class BatchCounts:
    """Counts of slow-mode Jacobian comparisons (one per function variant and mode of a check:
    the function, each part of complex outputs or inputs, forward mode) that a check reached:
    ``batched``, decided on batched blocks (a clear pass), and ``fallbacks``, judged element by
    element, by :class:`~distcheck.kinds.Fallback` reason. Nothing is counted for checks that do
    not batch (``vectorize=False``, fast mode). Add several checks' counts with ``+=``."""

    batched: int = 0
    fallbacks: collections.Counter = field(default_factory=collections.Counter)

    @property
    def exact(self) -> int:
        """Comparisons judged element by element."""
        return sum(self.fallbacks.values())

    def fell_back(self, reason: Fallback) -> None:
        self.fallbacks[Fallback(reason)] += 1

    def __iadd__(self, other: BatchCounts) -> BatchCounts:
        self.batched += other.batched
        self.fallbacks.update(other.fallbacks)
        return self
