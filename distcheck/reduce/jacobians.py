"""Assembling Jacobians from unit results (column chunks stacked down, row chunks across)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from distcheck.plan.units import ColumnsResult, RowsResult
from distcheck.plan.units.numerical import SparseColumns

Value = Callable[[int], object]  # unit index -> its value (raising the unit's exception)


def _joined(parts: Sequence[np.ndarray], axis: int) -> np.ndarray:
    """The chunks side by side; a single chunk as it is (a Jacobian can be large: no copy)."""
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=axis)


def window(value: Value, outputs: tuple[int, int] | None) -> Value:
    """``value`` restricted to the outputs ``start:stop`` of each numerical unit (units shared by
    the two parts of complex outputs); ``value`` itself for None."""
    if outputs is None:
        return value
    start, stop = outputs

    def part(unit: int):
        result = value(unit)
        if isinstance(result, SparseColumns):
            return SparseColumns(result.blocks[start:stop], result.rows)
        return result[start:stop]

    return part


def numerical(
    value: Value, units_per_input: Sequence[Sequence[int]], numels: Sequence[int] | None = None
) -> list[list[np.ndarray | None]]:
    """``[input][output position]`` numerical Jacobians, stacked from column chunks. Columns of
    a sparse input's specified values are scattered into its dense rows (``numels[i]`` rows;
    the others stay zero)."""
    jacobians = []
    for i, units in enumerate(units_per_input):
        chunks = [value(u) for u in units]
        sparse = [c for c in chunks if isinstance(c, SparseColumns)]
        blocks = [c.blocks if isinstance(c, SparseColumns) else c for c in chunks]
        stacked = [None if parts[0] is None else _joined(parts, axis=0) for parts in zip(*blocks)]
        if sparse:
            rows = np.concatenate([c.rows for c in sparse])
            for k, block in enumerate(stacked):
                if block is not None:
                    full = np.zeros((numels[i], block.shape[1]), dtype=block.dtype)
                    full[rows] = block
                    stacked[k] = full
        jacobians.append(stacked)
    return jacobians


def backward(value: Value, units: Sequence[int]) -> RowsResult:
    """One output's analytical Jacobians (one per input), stacked from row chunks."""
    chunks: list[RowsResult] = [value(u) for u in units]
    blocks = [_joined(parts, axis=1) for parts in zip(*(c.blocks for c in chunks))]
    return replace(attributes(chunks), blocks=blocks)


def attributes(chunks: Sequence[RowsResult]) -> RowsResult:
    """The sizes, dtypes and reentrancy of an output's row chunks, as of their joined rows
    (without blocks): the first wrong size and dtype, the largest repeat difference."""
    # NaN propagates as in torch's max(): a NaN difference never fails reentrancy
    repeat = [float(np.max(d)) for d in zip(*(c.repeat_difference for c in chunks))]
    wrong_size = next((c.wrong_size for c in chunks if c.wrong_size), None)
    wrong_dtype = next((c.wrong_dtype for c in chunks if c.wrong_dtype), None)
    return RowsResult([], repeat, wrong_size, wrong_dtype)


def forward(value: Value, units: Sequence[int]) -> ColumnsResult:
    """One input's forward-mode Jacobians (one per output position), stacked from column chunks."""
    chunks: list[ColumnsResult] = [value(u) for u in units]
    blocks = [None if parts[0] is None else _joined(parts, axis=0) for parts in zip(*(c.blocks for c in chunks))]
    return ColumnsResult(blocks, any(c.dtype_mismatch for c in chunks))
