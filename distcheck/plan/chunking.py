"""Chunking policies: how many items (Jacobian columns or rows) go into one work unit.

A policy sees a :class:`Workload` and returns ``(start, stop)`` ranges covering
``range(items)`` in order. Policies are small and live one per file; the planner only calls
``chunks``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Workload:
    """``items`` independent items of one kind, each costing about ``seconds_per_item`` and
    adding ``bytes_per_item`` to what its unit holds while it runs (its result)."""

    items: int
    seconds_per_item: float | None = None
    bytes_per_item: int = 0


class ChunkPolicy(Protocol):
    needs_costs: bool  # whether the planner must measure seconds_per_item

    def chunks(self, workload: Workload) -> list[tuple[int, int]]: ...


class Whole:
    """Everything of one kind in one unit: right for in-process (serial) execution."""

    needs_costs = False

    def chunks(self, workload: Workload) -> list[tuple[int, int]]:
        return [(0, workload.items)]


def even_ranges(items: int, pieces: int) -> list[tuple[int, int]]:
    """``range(items)`` cut into ``pieces`` contiguous ranges whose sizes differ by at most 1."""
    pieces = max(1, min(pieces, items))
    base, extra = divmod(items, pieces)
    ranges, start = [], 0
    for k in range(pieces):
        stop = start + base + (1 if k < extra else 0)
        ranges.append((start, stop))
        start = stop
    return ranges
