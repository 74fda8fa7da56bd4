"""The cost model: chunk sizes from measured costs, for executors with many workers (Ray).

The planner measures one function evaluation and one backward pass on the driver and hands
each kind of work to :meth:`CostModel.chunks` as a :class:`Workload` (items × seconds per
item). The model cuts a workload into pieces of similar duration such that

- every piece holds at least ``min_task`` seconds of work, so that the executor's per-task
  overhead (about 1 ms on Ray) stays a few percent;
- a workload large enough is cut into ``tasks_per_worker`` pieces per worker, so that workers
  that finish early find more work and all of them end at about the same time;
- no piece is longer than ``max_task`` seconds (huge checks get more, shorter pieces).

:meth:`CostModel.tasks` then groups consecutive small units (auxiliary checks, small inputs)
into tasks of at least ``min_task``, so that a small check is a single task.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from distcheck.plan.chunking import Workload, even_ranges
from distcheck.plan.units import AnalyticalRows, NumericalColumns


@dataclass(frozen=True)
class CostModel:
    """A :class:`~distcheck.plan.chunking.ChunkPolicy` that sizes chunks in seconds of work.

    ``workers``: how many units can run at once (the executor fills it in).
    """

    workers: int = 1
    min_task: float = 0.02  # seconds: ≥ 20× Ray's per-task overhead
    max_task: float = 2.0  # seconds
    tasks_per_worker: int = 8

    needs_costs = True

    def pieces(self, seconds: float) -> int:
        """How many pieces ``seconds`` of divisible work is cut into."""
        wanted = max(1, self.workers) * self.tasks_per_worker
        most = math.floor(seconds / self.min_task)  # pieces of at least min_task
        least = math.ceil(seconds / self.max_task)  # pieces of at most max_task
        return max(1, least, min(wanted, most))

    def chunks(self, workload: Workload) -> list[tuple[int, int]]:
        if workload.seconds_per_item is None or workload.items <= 1:
            return [(0, workload.items)]
        return even_ranges(workload.items, self.pieces(workload.items * workload.seconds_per_item))

    def tasks(self, units: Sequence[Any], costs: Any) -> list[list[int]]:
        """Unit indices grouped into tasks: consecutive units share a task while their
        estimated total stays under ``min_task``. Without costs, one unit per task."""
        groups: list[list[int]] = []
        total = math.inf
        for index, unit in enumerate(units):
            seconds = math.inf if costs is None else unit_seconds(unit, costs)
            if total + seconds > self.min_task:
                groups.append([])
                total = 0.0
            groups[-1].append(index)
            total += seconds
        return groups


def unit_seconds(unit: Any, costs: Any) -> float:
    """A unit's estimated run time from ``costs`` (a :class:`~distcheck.plan.planner.Costs`):
    finite differences cost 2 evaluations per column (4 for a complex input), analytical rows
    2 backward passes per row (each row is computed twice); any other unit about one
    evaluation and one backward pass per item."""
    if isinstance(unit, NumericalColumns):
        return unit.size * (4 if unit.is_complex else 2) * costs.evaluation
    if isinstance(unit, AnalyticalRows):
        return unit.size * 2 * costs.backward
    return getattr(unit, "size", 1) * (costs.evaluation + costs.backward)
