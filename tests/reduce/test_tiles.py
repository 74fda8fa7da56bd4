"""A backward-mode comparison made tile by tile decides what the joined comparison decides."""

from __future__ import annotations

import numpy as np
import pytest

from distcheck.kinds import Mode
from distcheck.numerics.compare import allclose
from distcheck.plan.stages import JacobianComparison, OutputInfo
from distcheck.plan.units import RowsResult
from distcheck.plan.units.numerical import SparseColumns
from distcheck.plan.units.slots import InputSlot
from distcheck.reduce import tiles

RTOL, ATOL = 1e-3, 1e-5


def _cuts(total: int, pieces: int, rng) -> list[tuple[int, int]]:
    edges = sorted(rng.choice(np.arange(1, total), size=pieces - 1, replace=False)) if pieces > 1 else []
    bounds = [0, *edges, total]
    return list(zip(bounds[:-1], bounds[1:]))


class _Chunked:
    """Whole Jacobians ``numerical[i][k]`` / ``analytical[k][i]`` (input elements x output
    elements) cut into numerical column units per input and analytical row units per output,
    the results as units hand them to the reducer."""

    def __init__(self, numerical, analytical, column_pieces: int, row_pieces: int, seed: int = 0):
        rng = np.random.default_rng(seed)
        inputs, outputs = len(numerical), len(analytical)
        self.values: list = []
        groups_n, groups_a = [], []
        for i in range(inputs):
            units = []
            for c0, c1 in _cuts(numerical[i][0].shape[0], column_pieces, rng):
                units.append(len(self.values))
                self.values.append([numerical[i][k][c0:c1] for k in range(outputs)])
            groups_n.append(tuple(units))
        for k in range(outputs):
            units = []
            for r0, r1 in _cuts(analytical[k][0].shape[1], row_pieces, rng):
                units.append(len(self.values))
                blocks = [np.asfortranarray(analytical[k][i][:, r0:r1]) for i in range(inputs)]
                self.values.append(RowsResult(blocks, [0.0] * inputs, None, None))
            groups_a.append(tuple(units))
        self.stage = JacobianComparison(
            variant=0,
            mode=Mode.BACKWARD,
            inputs=tuple(InputSlot(i, (numerical[i][0].shape[0],), "float64") for i in range(inputs)),
            outputs=tuple(OutputInfo(k, (analytical[k][0].shape[1],), False) for k in range(outputs)),
            numerical=tuple(groups_n),
            analytical=tuple(groups_a),
        )

    def value(self, unit: int):
        return self.values[unit]

    def close(self, check_rows=lambda rows: None):
        return tiles.backward_close(self.stage, self.value, self.value, check_rows, RTOL, ATOL)


def _jacobians(rng, sizes_in, sizes_out):
    numerical = [[rng.standard_normal((m, n)) for n in sizes_out] for m in sizes_in]
    analytical = [[numerical[i][k].copy() for i in range(len(sizes_in))] for k in range(len(sizes_out))]
    return numerical, analytical


@pytest.mark.parametrize("seed", range(12))
def test_tiles_decide_as_the_joined_blocks_wherever_an_element_is_off(seed):
    rng = np.random.default_rng(seed)
    numerical, analytical = _jacobians(rng, [7, 13], [11, 5])
    assert _Chunked(numerical, analytical, 5, 4, seed).close() is True
    k, i = rng.integers(2), rng.integers(2)
    block = analytical[k][i]
    row, column = rng.integers(block.shape[0]), rng.integers(block.shape[1])
    allowed = ATOL + RTOL * abs(numerical[i][k][row, column])
    block[row, column] += allowed * rng.choice([0.5, 0.999, 1.001, 3.0, np.nan])
    joined = all(allclose(analytical[k][i], numerical[i][k], RTOL, ATOL) for k in range(2) for i in range(2))
    for columns, rows in [(1, 1), (3, 2), (5, 4)]:
        assert _Chunked(numerical, analytical, columns, rows, seed).close() is joined


def test_the_row_units_attributes_are_judged_joined_before_their_tiles():
    rng = np.random.default_rng(0)
    numerical, analytical = _jacobians(rng, [6], [8])
    chunked = _Chunked(numerical, analytical, 2, 3)
    unit = chunked.stage.analytical[0][1]
    chunked.values[unit] = RowsResult(chunked.values[unit].blocks, [float("nan")], "a wrong size", None)
    seen = []
    assert chunked.close(seen.append)
    (rows,) = seen
    assert rows.wrong_size == "a wrong size" and np.isnan(rows.repeat_difference[0]) and rows.blocks == []


def test_a_sparse_inputs_columns_are_left_to_the_joined_comparison():
    rng = np.random.default_rng(0)
    numerical, analytical = _jacobians(rng, [6], [8])
    chunked = _Chunked(numerical, analytical, 2, 2)
    unit = chunked.stage.numerical[0][0]
    chunked.values[unit] = SparseColumns(chunked.values[unit], np.arange(len(chunked.values[unit][0])))
    assert chunked.close() is None


def test_chunks_that_do_not_tile_the_blocks_are_refused():
    rng = np.random.default_rng(0)
    numerical, analytical = _jacobians(rng, [6], [8])
    chunked = _Chunked(numerical, analytical, 2, 2)
    unit = chunked.stage.numerical[0][0]
    chunked.values[unit] = [chunked.values[unit][0][:, :-1]]
    with pytest.raises(ValueError, match="do not tile"):
        chunked.close()
