"""Block comparisons: slow-mode Jacobians compared where their pieces are, tile by tile.

A :class:`BlockJob` takes one numerical column unit's result and, one at a time, the results of
analytical units (row units in backward mode, forward column units in forward mode), and
compares the tiles where they meet (:mod:`distcheck.numerics.blocks`). It returns only what the
reducer needs to judge the stage in torch's order: each unit's error or its attributes (the
result without its blocks) and each tile's summary — or, asked for a window of a failed block,
that window's values. At most one numerical and one analytical result are held at a time, so a
job needs the memory of two units' results, which the planner bounds (the block budget).
"""

from __future__ import annotations

import dataclasses
import traceback
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from distcheck.numerics.blocks import TileSummary, summarize
from distcheck.plan.units import UnitResult

WHOLE_FACTOR = 3  # see whole_bytes


def whole_bytes(jacobians: float) -> float:
    """The memory of comparing a check's Jacobians whole in one process, from ``jacobians``
    (its numerical and analytical Jacobians' bytes): the numerical columns' parts and their
    joined copy, the analytical rows (computed twice for ``nondet_tol``, one run held) and their
    joined copy, and what their batches hold while they run — taken as three times ``jacobians``
    (a bound, checked with ``benchmarks/bench_split.py --whole-suite``'s memory probe). Above
    the block budget a check is compared block by block instead."""
    return WHOLE_FACTOR * jacobians


def serial_bytes(jacobians: float) -> float:
    """The memory of checking a case in one process with its comparisons block by block, from
    ``jacobians`` (its numerical and analytical Jacobians' bytes): the numerical Jacobian, the
    analytical one (computed twice for ``nondet_tol``, one run held) and what their batches hold
    while they run — taken as 1.5 times ``jacobians``. Above the block budget a case is split
    (``distcheck/case/budget.py``)."""
    return 1.5 * jacobians


@dataclass(frozen=True)
class Cut:
    """A tile's part of a unit's result: ``blocks[block][rows[0]:rows[1], columns[0]:columns[1]]``."""

    block: int
    rows: tuple[int, int]
    columns: tuple[int, int]

    def of(self, blocks: list) -> np.ndarray | None:
        block = blocks[self.block]
        return None if block is None else block[slice(*self.rows), slice(*self.columns)]


@dataclass(frozen=True)
class Tile:
    """Where a numerical and an analytical unit meet in the block of ``pair`` (output k,
    input i): at ``origin`` of a block of ``shape`` (input elements down, output elements across)."""

    pair: tuple[int, int]
    analytical: int  # index into the job's analytical units
    numerical_cut: Cut
    analytical_cut: Cut
    origin: tuple[int, int]
    shape: tuple[int, int]

    def parts(self, numerical: list, analytical: list) -> tuple[np.ndarray, np.ndarray]:
        n = self.numerical_cut.of(numerical)
        a = self.analytical_cut.of(analytical)
        return (np.zeros_like(n) if a is None else a), n


@dataclass(frozen=True)
class Window:
    """Rows ``row0:row0 + height`` and columns ``col0:col0 + width`` of a block."""

    row0: int
    col0: int
    height: int
    width: int

    def overlap(self, tile: Tile, height: int, width: int) -> tuple[slice, slice, slice, slice] | None:
        """``(tile rows, tile columns, window rows, window columns)`` where a tile of
        ``height`` × ``width`` at its origin meets the window; None if it does not."""
        top, left = max(self.row0, tile.origin[0]), max(self.col0, tile.origin[1])
        bottom = min(self.row0 + self.height, tile.origin[0] + height)
        right = min(self.col0 + self.width, tile.origin[1] + width)
        if top >= bottom or left >= right:
            return None
        r, c = tile.origin
        return (
            slice(top - r, bottom - r),
            slice(left - c, right - c),
            slice(top - self.row0, bottom - self.row0),
            slice(left - self.col0, right - self.col0),
        )


@dataclass(frozen=True)
class BlockJob:
    """Compare ``numerical`` (a plan unit index, or None) against each of ``analytical``."""

    numerical: int | None
    analytical: tuple[int, ...]
    tiles: tuple[Tile, ...]
    rtol: float
    atol: float
    window: Window | None = None  # set: return this window's values instead of summaries


@dataclass
class JobOutcome:
    """``numerical``/``analytical``: the units' results without their blocks (errors kept);
    ``tiles``: a summary per tile (None where a unit failed); ``windows``: per tile, the part
    of the job's window it holds, as ``(window rows, window columns, numerical, analytical)``."""

    numerical: UnitResult | None
    analytical: list[UnitResult]
    tiles: list[TileSummary | None]
    windows: list[tuple] = dataclasses.field(default_factory=list)


def _attributes(result: UnitResult) -> UnitResult:
    """A unit's result without its blocks: its error, or its value's other fields."""
    value = result.value
    if result.error is None and dataclasses.is_dataclass(value) and hasattr(value, "blocks"):
        value = dataclasses.replace(value, blocks=[])
    elif result.error is None:
        value = None
    return dataclasses.replace(result, value=value)


def _blocks(value) -> list:
    return value if isinstance(value, list) else value.blocks


def run_job(job: BlockJob, fetch: Callable[[int], UnitResult]) -> JobOutcome:
    """Run ``job``, fetching unit results with ``fetch`` (unit index -> result)."""
    numerical = None if job.numerical is None else fetch(job.numerical)
    outcome = JobOutcome(None if numerical is None else _attributes(numerical), [], [None] * len(job.tiles))
    for j, unit in enumerate(job.analytical):
        analytical = fetch(unit)
        outcome.analytical.append(_attributes(analytical))
        if numerical is None or numerical.error is not None or analytical.error is not None:
            continue
        n_blocks, a_blocks = _blocks(numerical.value), _blocks(analytical.value)
        for t, tile in enumerate(job.tiles):
            if tile.analytical != j:
                continue
            try:
                a, n = tile.parts(n_blocks, a_blocks)
                if job.window is None:
                    outcome.tiles[t] = summarize(a, n, tile.origin, tile.shape, job.rtol, job.atol)
                    continue
                where = job.window.overlap(tile, *n.shape)
                if where is not None:
                    rows, columns, window_rows, window_columns = where
                    kept = (np.array(n[rows, columns]), np.array(a[rows, columns]))
                    outcome.windows.append((window_rows, window_columns, *kept))
            except Exception as e:  # a tile the units' results do not fit: the unit's error
                failed = UnitResult(error=e, traceback=traceback.format_exc(), worker=analytical.worker)
                outcome.analytical[j] = failed
        del analytical
    return outcome
