"""What a check's slow-mode Jacobian comparisons were decided on: batched blocks, or element by
element (torch's loops), and why."""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

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

    def __bool__(self) -> bool:
        """Whether any comparison was counted."""
        return bool(self.batched or self.exact)

    def to_json(self) -> dict[str, Any]:
        """``{"batched": N, "fallbacks": {reason: M, ...}}``, the reasons most frequent first
        (``fallbacks`` only where some comparison fell back)."""
        counted: dict[str, Any] = {"batched": self.batched}
        if self.exact:
            counted["fallbacks"] = {str(reason): n for reason, n in self.fallbacks.most_common() if n}
        return counted

    @classmethod
    def from_json(cls, counted: Mapping[str, Any]) -> BatchCounts:
        """The counts :meth:`to_json` wrote (a reason this version does not know is kept as written)."""
        return cls(int(counted.get("batched", 0)), collections.Counter(dict(counted.get("fallbacks", {}))))

    @classmethod
    def total(cls, counted: Iterable[Mapping[str, Any] | None]) -> BatchCounts:
        """The sum of several checks' :meth:`to_json` (None: a check that counted nothing)."""
        summed = cls()
        for one in counted:
            if one:
                summed += cls.from_json(one)
        return summed

    def describe(self) -> str:
        """One line: ``N batched, M element by element: small 12, slower 3``."""
        reasons = ", ".join(f"{reason} {n}" for reason, n in self.fallbacks.most_common() if n)
        return f"{self.batched} batched, {self.exact} element by element" + (f": {reasons}" if reasons else "")
