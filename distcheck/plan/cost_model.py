"""The cost model: chunk sizes from measured costs, for executors with many workers (Ray).

The planner measures one function evaluation and one backward pass on the driver and hands
each kind of work to :meth:`CostModel.chunks` as a :class:`Workload` (items × seconds per
item). A task has a fixed cost — CPU when tasks are short and queued back to back, and a
worker's time between two tasks that return megabytes (result to the object store, the next
task pushed to the worker; figures in docs/architecture.md). So the model cuts a workload into pieces such that

- a workload too small to hold two pieces of ``min_task`` seconds stays whole;
- a larger one is cut into ``tasks_per_worker`` rounds of one piece per worker, pieces
  shrinking round by round (2:1 for two rounds): workers that finish early find more work,
  the last tasks to run are short so that all workers end at about the same time, and there
  are few enough tasks that their overhead stays a few percent;
- no piece is longer than ``max_task`` seconds (a huge check gets more, equal pieces, so that
  each is short compared with the whole).

:meth:`CostModel.tasks` then groups consecutive small units (auxiliary checks, small inputs)
into tasks of at most ``min_task`` — a small check is a single task — and lists the tasks
longest first, so that the last tasks to run are the short ones.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from distcheck.plan.chunking import Workload, even_ranges
from distcheck.plan.units import AnalyticalRows, ForwardColumns, NumericalColumns
from distcheck.plan.units.slots import slots_bytes


@dataclass(frozen=True)
class CostModel:
    """A :class:`~distcheck.plan.chunking.ChunkPolicy` that sizes chunks in seconds of work.

    ``workers``: how many units can run at once (the executor fills it in). ``cluster``: the
    workers of the whole cluster when ``workers`` is a share of it (a split case cut while
    others run; 0: ``workers`` is the whole cluster).
    """

    workers: int = 1
    cluster: int = 0
    min_task: float = 0.1  # seconds: a task's overhead (above) stays under ~10% of it
    max_task: float = 10.0  # seconds
    tasks_per_worker: int = 2
    block_bytes: float = math.inf  # a unit's result holds at most half of it (the block budget)
    # seconds: a check whose work, estimated from one timing of each call, is under it keeps the
    # plan made with that estimate; above it, the calls are timed again (best of up to three, the
    # first timing among them) and the check planned anew. An executor sets it where the
    # estimate cannot change the plan's decisions (0: always timed again).
    settled_below: float = 0.0

    needs_costs = True

    def rounds(self) -> int:
        """Rounds of one piece per worker: ``tasks_per_worker``; for a share of a larger
        cluster, as many more as it takes for its last round's pieces to be no longer than
        those of a cut for the whole cluster (rounds of r, r-1, ..., 1 parts: the last holds
        1 / (workers · r(r+1)/2) of the work). So a split case among eight is cut into fewer,
        longer pieces (fewer tasks to hand out and report), and its last ones, which may run
        while other workers have nothing left, are as short as a lone split case's."""
        workers, most = max(1, self.workers), self.tasks_per_worker
        cluster = max(workers, self.cluster)
        rounds = most
        while workers * rounds * (rounds + 1) < cluster * most * (most + 1):
            rounds += 1
        return rounds

    def pieces(self, seconds: float) -> int:
        """How many equal pieces ``seconds`` of divisible work is cut into."""
        workers = max(1, self.workers)
        wanted = max(workers * self.rounds(), math.ceil(seconds / self.max_task))
        pieces = min(wanted, math.floor(seconds / self.min_task))
        return max(1, pieces - pieces % workers if pieces >= workers else pieces)

    def chunks(self, workload: Workload) -> list[tuple[int, int]]:
        """:meth:`timed_chunks`, cut finer where a piece would hold more than half the block
        budget (a block job holds two results; a task, its units' results)."""
        ranges = self.timed_chunks(workload)
        if workload.bytes_per_item and math.isfinite(self.block_bytes):
            most = max(1, int(self.block_bytes / 2 // workload.bytes_per_item))
            if any(stop - start > most for start, stop in ranges):
                return even_ranges(workload.items, -(-workload.items // most))
        return ranges

    def timed_chunks(self, workload: Workload) -> list[tuple[int, int]]:
        """Equal pieces; with :meth:`rounds` rounds of one piece per worker, pieces that
        shrink round by round (2:1 for two rounds, 3:2:1 for three...), so that the tasks that
        run last, while other workers may already be idle, are short."""
        if workload.seconds_per_item is None or workload.items <= 1:
            return [(0, workload.items)]
        seconds = workload.items * workload.seconds_per_item
        pieces = self.pieces(seconds)
        workers = max(1, self.workers)
        rounds = pieces // workers if pieces == workers * self.rounds() else 1
        weights = [rounds - r for r in range(rounds) for _ in range(workers)]
        if rounds < 2 or workload.items < sum(weights) or seconds / sum(weights) < self.min_task:
            return even_ranges(workload.items, pieces)
        return weighted_ranges(workload.items, weights)

    def tasks(self, units: Sequence[Any], costs: Any) -> list[list[int]]:
        """Unit indices grouped into tasks, longest task first: consecutive units share a task
        while their estimated total stays under ``min_task`` and what they hold (their
        results, :func:`unit_bytes`) under half the block budget, so that a task holds no more
        than a unit may. Without costs (``None``), one unit per task, in order."""
        if costs is None:
            return [[index] for index in range(len(units))]
        groups: list[list[int]] = []
        seconds: list[float] = []
        held: list[int] = []
        for index, unit in enumerate(units):
            estimate, size = unit_seconds(unit, costs), unit_bytes(unit)
            if not groups or seconds[-1] + estimate > self.min_task or held[-1] + size > self.block_bytes / 2:
                groups.append([])
                seconds.append(0.0)
                held.append(0)
            groups[-1].append(index)
            seconds[-1] += estimate
            held[-1] += size
        order = sorted(range(len(groups)), key=lambda task: -seconds[task])  # stable: ties stay in order
        return [groups[task] for task in order]


def best_time(call: Callable[[], Any], limits: Sequence[float] = (math.inf, 0.1, 0.0), best: float = math.inf) -> float:
    """The shortest of up to ``len(limits)`` timings of ``call``: a single timing can be
    inflated many times over by another process, or by a first call's one-off start-up costs.
    Timing stops once the best so far exceeds the limit of that round: by default every call is
    timed twice (a first call's one-off cost, such as torch's first backward pass in a process,
    timed once would make the check's plan hundreds of tiny tasks), a third time if both took under
    0.1 s — a check makes thousands of such calls, so measuring stays cheap next to it;
    ``limits=(math.inf,) * n`` times it ``n`` times. ``best``: a timing taken before, counted as
    the first round's: ``best_time(call, limits[1:], best=first)`` times as ``best_time(call,
    limits)`` would have after a first timing of ``first`` (not over ``limits[0]``)."""
    for limit in limits:
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
        if best > limit:
            break
    return best


def weighted_ranges(items: int, weights: Sequence[int]) -> list[tuple[int, int]]:
    """``range(items)`` cut into contiguous ranges of sizes proportional to ``weights`` (each at
    least 1 item when ``items >= sum(weights)``)."""
    total, acc, start, ranges = sum(weights), 0, 0, []
    for weight in weights:
        acc += weight
        stop = items * acc // total
        ranges.append((start, stop))
        start = stop
    return ranges


def unit_seconds(unit: Any, costs: Any) -> float:
    """A unit's estimated run time from ``costs`` (a :class:`~distcheck.plan.builder.Costs`):
    finite differences cost 2 evaluations per column (4 for a complex input), analytical rows
    2 backward passes per row (each row is computed twice); any other unit about one
    evaluation and one backward pass per item."""
    if isinstance(unit, NumericalColumns):
        return unit.size * (4 if unit.is_complex else 2) * costs.evaluation
    if isinstance(unit, AnalyticalRows):
        return unit.size * 2 * costs.backward
    return getattr(unit, "size", 1) * (costs.evaluation + costs.backward)


def unit_bytes(unit: Any) -> int:
    """What a unit holds while it runs, in bytes: its result's Jacobian blocks (analytical rows
    are computed twice, the second run compared as it comes, not held); 0 for any other unit."""
    if isinstance(unit, NumericalColumns):
        return unit.size * slots_bytes(unit.outputs)
    if isinstance(unit, AnalyticalRows):
        return unit.size * slots_bytes(unit.inputs)
    if isinstance(unit, ForwardColumns):
        return unit.size * slots_bytes(unit.outputs)
    return 0


def work_seconds(units: Sequence[Any], costs: Any) -> float:
    """The estimated run time of all of ``units`` from ``costs`` (:func:`unit_seconds`)."""
    return sum(unit_seconds(unit, costs) for unit in units)
