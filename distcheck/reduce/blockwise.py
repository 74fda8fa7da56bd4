"""A slow-mode stage judged block by block where its pieces are, never assembled.

When a stage's Jacobians exceed the executor's block budget, the reducer does not fetch its
units' results: it hands :class:`~distcheck.plan.comparisons.BlockJob` s to the results'
block runner (the Ray executor runs them as tasks next to the results in the object store).
Each job compares one numerical column unit with the analytical units it meets, tile by tile;
the reducer receives each unit's error or attributes and each tile's summary, and judges the
stage in torch's order: numerical errors first; then, in backward mode, output by output, the
row units' errors, sizes, dtypes and reentrancy before the output's comparisons; in forward
mode every column unit's errors and dtypes before the comparisons. A failed comparison's
message is made from the tiles' summaries (:mod:`distcheck.numerics.blocks`) and is the
whole-Jacobian message, character for character; a second round of jobs fetches the bounded
window around the worst element that reports draw (``error.blocks``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from distcheck.kinds import Mode
from distcheck.numerics.blocks import combine
from distcheck.plan.comparisons import BlockJob, Cut, JobOutcome, Tile, Window, whole_bytes
from distcheck.plan.stages import JacobianComparison
from distcheck.plan.units import ColumnsResult, NumericalColumns, RowsResult, UnitResult
from distcheck.reduce import messages
from distcheck.reduce.failure_blocks import FailureBlocks, WindowedBlocks, attach, window_of


class BlockRunner(Protocol):
    budget: float  # bytes: a stage whose Jacobians need more is compared block by block

    def run(self, jobs: Sequence[BlockJob]) -> list[JobOutcome]: ...


class LocalBlocks:
    """Runs block jobs in this process against ``results`` (for tests, and for executors
    whose results are already here)."""

    def __init__(self, results, budget: float):
        self.results, self.budget = results, budget

    def run(self, jobs: Sequence[BlockJob]) -> list[JobOutcome]:
        from distcheck.plan.comparisons import run_job

        return [run_job(job, self.results.get) for job in jobs]


def jacobian_bytes(plan, stage: JacobianComparison) -> int:
    """The stage's numerical and analytical Jacobians together, in bytes."""
    total = 0
    for units in stage.numerical:
        for u in units:
            unit = plan.units[u]
            slots = unit.outputs if stage.numerical_outputs is None else unit.outputs[slice(*stage.numerical_outputs)]
            total += unit.size * sum(s.numel * np.dtype(s.dtype).itemsize for s in slots if s is not None)
    return 2 * total


def applies(plan, stage: JacobianComparison, runner: BlockRunner | None) -> bool:
    """Whether the stage is judged block by block: a runner, dense inputs (a sparse input's
    columns are scattered rows), Jacobians over the budget."""
    if runner is None:
        return False
    numerical = [plan.units[u] for units in stage.numerical for u in units]
    if any(not isinstance(u, NumericalColumns) or u.sparse for u in numerical):
        return False
    return whole_bytes(jacobian_bytes(plan, stage)) > runner.budget


class _Grid:
    """A stage's jobs and, per block (output k, input i), where its tiles are."""

    def __init__(self, plan, stage: JacobianComparison, rtol: float, atol: float):
        self.plan, self.stage, self.rtol, self.atol = plan, stage, rtol, atol
        self.offset = 0 if stage.numerical_outputs is None else stage.numerical_outputs[0]
        self.jobs: list[BlockJob] = []
        self.reads: dict[int, tuple[int, int]] = {}  # analytical unit -> (job, index in job)
        self.numerical_job: dict[int, int] = {}
        build = self._backward if stage.mode == Mode.BACKWARD else self._forward
        for i, units in enumerate(stage.numerical):
            for u in units:
                build(i, u)
        for units in stage.analytical:  # analytical units no numerical unit meets
            missing = tuple(u for u in units if u not in self.reads)
            if missing:
                self._add(None, missing, ())

    def shape(self, k: int, i: int) -> tuple[int, int]:
        return self.stage.inputs[i].numel, math.prod(self.stage.outputs[k].shape)

    def _add(self, numerical: int | None, analytical: Sequence[int], tiles: Sequence[Tile]) -> None:
        job = len(self.jobs)
        for j, unit in enumerate(analytical):
            self.reads.setdefault(unit, (job, j))
        if numerical is not None:
            self.numerical_job[numerical] = job
        self.jobs.append(BlockJob(numerical, tuple(analytical), tuple(tiles), self.rtol, self.atol))

    def _backward(self, i: int, u: int) -> None:
        n = self.plan.units[u]
        analytical, tiles = [], []
        for k, units in enumerate(self.stage.analytical):
            block = self.offset + self.stage.outputs[k].position
            for r in units:
                rows = self.plan.units[r]
                tiles.append(
                    Tile(
                        (k, i),
                        len(analytical),
                        Cut(block, (0, n.size), (rows.start, rows.stop)),
                        Cut(i, (n.start, n.stop), (0, rows.size)),
                        (n.start, rows.start),
                        self.shape(k, i),
                    )
                )
                analytical.append(r)
        self._add(u, analytical, tiles)

    def _forward(self, i: int, u: int) -> None:
        n = self.plan.units[u]
        analytical, tiles = [], []
        for f in self.stage.analytical[i]:
            columns = self.plan.units[f]
            low, high = max(n.start, columns.start), min(n.stop, columns.stop)
            if low >= high:
                continue
            for k, output in enumerate(self.stage.outputs):
                width = math.prod(output.shape)
                tiles.append(
                    Tile(
                        (k, i),
                        len(analytical),
                        Cut(self.offset + output.position, (low - n.start, high - n.start), (0, width)),
                        Cut(output.position, (low - columns.start, high - columns.start), (0, width)),
                        (low, 0),
                        self.shape(k, i),
                    )
                )
            analytical.append(f)
        self._add(u, analytical, tiles)


def judge(reducer, stage: JacobianComparison, runner: BlockRunner) -> None:
    """Judge ``stage`` block by block (see the module's doc); raises its first failure."""
    options = reducer.options
    grid = _Grid(reducer.plan, stage, options.rtol, options.atol)
    outcomes = runner.run(grid.jobs)
    for units in stage.numerical:
        for u in units:
            outcomes[grid.numerical_job[u]].numerical.unwrap()

    def attributes(unit: int) -> UnitResult:
        job, j = grid.reads[unit]
        return outcomes[job].analytical[j]

    def compare(k: int, i: int) -> None:
        tiles = [
            summary
            for job, outcome in zip(grid.jobs, outcomes)
            for tile, summary in zip(job.tiles, outcome.tiles)
            if tile.pair == (k, i) and summary is not None
        ]
        block = combine(grid.shape(k, i), tiles)
        if not block.close:
            raise _failure(reducer, stage, grid, runner, block, k, i)

    if stage.mode == Mode.FORWARD:
        columns = [[attributes(f).unwrap() for f in units] for units in stage.analytical]
        for per_input in columns:
            reducer.check_forward_dtypes(_any_mismatch(per_input))
        for k in range(len(stage.outputs)):
            for i in range(len(stage.inputs)):
                compare(k, i)
        return
    for k, units in enumerate(stage.analytical):
        rows = [attributes(r).unwrap() for r in units]
        reducer.check_attributes(_merged_rows(rows))
        for i in range(len(stage.inputs)):
            compare(k, i)


def _any_mismatch(columns: Sequence[ColumnsResult]) -> ColumnsResult:
    return ColumnsResult([], any(c.dtype_mismatch for c in columns))


def _merged_rows(chunks: Sequence[RowsResult]) -> RowsResult:
    """An output's attributes from its row units, as :func:`~distcheck.reduce.jacobians.backward` merges them."""
    repeat = [float(np.max(d)) for d in zip(*(c.repeat_difference for c in chunks))]
    wrong_size = next((c.wrong_size for c in chunks if c.wrong_size), None)
    wrong_dtype = next((c.wrong_dtype for c in chunks if c.wrong_dtype), None)
    return RowsResult([], repeat, wrong_size, wrong_dtype)


def _failure(reducer, stage, grid: _Grid, runner: BlockRunner, block, k: int, i: int) -> Exception:
    """The failed comparison's error: the whole-Jacobian message, and the window around the
    worst element for reports."""
    fmt = reducer.engine.format_block
    pair = reducer.pair(stage, k, i, reducer.options.atol)
    printed = fmt(block.numerical), fmt(block.analytical)
    text = messages.mismatch_of(*printed, block.worst, block.outside, block.size, 2, pair)
    error = reducer.fail(text)
    worst = (block.worst.row, block.worst.column) if block.worst is not None else (0, 0)
    itemsize = max(block.numerical.itemsize, block.analytical.itemsize)
    window = Window(*window_of(block.shape, itemsize, worst))
    n, a = _fetch_window(grid, runner, window, block, k, i)
    found = FailureBlocks.of(pair, n, a, stage.mode)
    return attach(error, WindowedBlocks.of(found, block.shape, window.row0, window.col0, worst))


def _fetch_window(grid: _Grid, runner: BlockRunner, window: Window, block, k: int, i: int):
    """The window's numerical and analytical values, from the tiles that hold them."""
    jobs = []
    for job in grid.jobs:
        tiles = tuple(t for t in job.tiles if t.pair == (k, i) and _meets(window, t))
        if tiles:
            used = sorted({t.analytical for t in tiles})
            renumbered = tuple(
                Tile(t.pair, used.index(t.analytical), t.numerical_cut, t.analytical_cut, t.origin, t.shape)
                for t in tiles
            )
            analytical = tuple(job.analytical[j] for j in used)
            jobs.append(BlockJob(job.numerical, analytical, renumbered, job.rtol, job.atol, window))
    n = np.zeros((window.height, window.width), dtype=block.numerical.dtype)
    a = np.zeros((window.height, window.width), dtype=block.analytical.dtype)
    for outcome in runner.run(jobs):
        for rows, columns, n_values, a_values in outcome.windows:
            n[rows, columns], a[rows, columns] = n_values, a_values
    return n, a


def _meets(window: Window, tile: Tile) -> bool:
    height = tile.numerical_cut.rows[1] - tile.numerical_cut.rows[0]
    width = tile.numerical_cut.columns[1] - tile.numerical_cut.columns[0]
    return window.overlap(tile, height, width) is not None
