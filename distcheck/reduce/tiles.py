"""A backward-mode Jacobian comparison made tile by tile on its units' results, never joined.

A numerical unit holds columns ``c0:c1`` of one input's Jacobians (rows ``c0:c1`` of the
``(input elements, output elements)`` block); an analytical unit holds rows ``r0:r1`` of one
output's (columns ``r0:r1`` of the block). Each pair meets in one tile, compared in place: an
element is close or not whatever block holds it, so every tile close is the joined blocks close.
Nothing as large as a whole Jacobian is copied (joining one touches as much fresh memory as it
holds, for a comparison that reads each element once).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from distcheck.numerics.compare import allclose
from distcheck.plan.stages import JacobianComparison
from distcheck.plan.units import RowsResult
from distcheck.plan.units.numerical import SparseColumns
from distcheck.reduce import jacobians

Value = Callable[[int], object]  # unit index -> its value (raising the unit's exception)


def backward_close(
    stage: JacobianComparison,
    numerical_value: Value,
    rows_value: Value,
    check_rows: Callable[[RowsResult], None],
    rtol: float,
    atol: float,
) -> bool | None:
    """Whether every analytical block of the backward-mode ``stage`` is close to its numerical
    one (``allclose`` at ``rtol``/``atol``), compared tile by tile; None where the numerical
    columns are a sparse input's (scattered into dense rows: join them). The numerical units
    are read first, then, per output, its row units, whose joined attributes (sizes, dtypes,
    reentrancy: :func:`~distcheck.reduce.jacobians.attributes`) ``check_rows`` judges (raising
    what it finds) before the output's tiles: the joined comparison's order. Raises
    ValueError where the units do not tile the blocks."""
    numerical = [[numerical_value(u) for u in units] for units in stage.numerical]
    if any(isinstance(chunk, SparseColumns) for chunks in numerical for chunk in chunks):
        return None
    for k, units in enumerate(stage.analytical):
        chunks: list[RowsResult] = [rows_value(u) for u in units]
        check_rows(jacobians.attributes(chunks))
        position = stage.outputs[k].position
        for i, input_chunks in enumerate(numerical):
            blocks = [chunk[position] for chunk in input_chunks]
            if not _close(blocks, [chunk.blocks[i] for chunk in chunks], rtol, atol):
                return False
    return True


def _close(numerical: list[np.ndarray], analytical: list[np.ndarray], rtol: float, atol: float) -> bool:
    """Numerical column chunks ``(columns, output elements)`` against analytical row chunks
    ``(input elements, rows)``, tile by tile."""
    columns, rows = sum(n.shape[0] for n in numerical), sum(a.shape[1] for a in analytical)
    if any(n.shape[1] != rows for n in numerical) or any(a.shape[0] != columns for a in analytical):
        shapes = [n.shape for n in numerical], [a.shape for a in analytical]
        raise ValueError(f"numerical column chunks {shapes[0]} and analytical row chunks {shapes[1]} do not tile")
    r0 = 0
    for a in analytical:
        c0 = 0
        for n in numerical:
            if not allclose(a[c0 : c0 + n.shape[0]], n[:, r0 : r0 + a.shape[1]], rtol, atol):
                return False
            c0 += n.shape[0]
        r0 += a.shape[1]
    return True
