"""A Jacobian block compared tile by tile: what each tile tells about the whole block, and how
the tiles' summaries combine into exactly what comparing the whole block would have given.

``allclose`` of the whole block is every tile's; the count outside the tolerance is the sum of
the tiles'; the largest violation is the tiles' largest, ties (and NaN, which ``argmax`` picks
first) going to the element first in the whole block's row-major order, as ``np.argmax`` over
the whole block chooses. A failure message prints both blocks, summarized above
:data:`PRINT_THRESHOLD` elements to their first and last :data:`PRINT_EDGE` rows and columns
(torch's and numpy's default print options): a tile sends the elements of it that are printed,
and :func:`stand_in` makes a small array that prints exactly as the whole block does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from distcheck.numerics.compare import WorstElement, close_mask, worst_candidate

PRINT_THRESHOLD = 1000  # elements above which a block prints summarized (torch's and numpy's default)
PRINT_EDGE = 3  # rows and columns printed at each end of a summarized block
SLAB = 1 << 17  # elements compared at a time: a tile's temporaries stay small


@dataclass(frozen=True)
class Worst:
    """A tile's largest violation, placed in the whole block (``row``, ``column``)."""

    excess: float  # NaN ranks above everything (argmax's choice)
    element: WorstElement

    def flat(self, columns: int) -> int:
        return self.element.row * columns + self.element.column

    def beats(self, other: Worst | None, columns: int) -> bool:
        if other is None:
            return True
        mine, theirs = math.isnan(self.excess), math.isnan(other.excess)
        if mine != theirs:
            return mine
        if not mine and self.excess != other.excess:
            return self.excess > other.excess
        return self.flat(columns) < other.flat(columns)


@dataclass(frozen=True)
class Printed:
    """Elements of a tile that a message prints: at rows × columns of the whole block."""

    rows: np.ndarray
    columns: np.ndarray
    numerical: np.ndarray  # (len(rows), len(columns))
    analytical: np.ndarray


@dataclass(frozen=True)
class TileSummary:
    """What one tile of a block contributes to the block's verdict and message."""

    close: bool
    outside: int
    worst: Worst | None
    printed: Printed
    dtypes: tuple[str, str]  # numerical, analytical


def printed_indices(size: int, shape: tuple[int, int]) -> np.ndarray:
    """Indices along a dimension of ``size`` (of a block of ``shape``) that its print shows."""
    if math.prod(shape) <= PRINT_THRESHOLD or size <= 2 * PRINT_EDGE:
        return np.arange(size)
    return np.concatenate([np.arange(PRINT_EDGE), np.arange(size - PRINT_EDGE, size)])


def _inside(indices: np.ndarray, start: int, stop: int) -> np.ndarray:
    return indices[(indices >= start) & (indices < stop)]


def summarize(
    analytical: np.ndarray,
    numerical: np.ndarray,
    origin: tuple[int, int],
    shape: tuple[int, int],
    rtol: float,
    atol: float,
) -> TileSummary:
    """One tile (at ``origin`` of a block of ``shape``), compared a slab of rows at a time."""
    height, width = numerical.shape
    close, outside, worst = True, 0, None
    step = max(1, SLAB // max(1, width))
    for start in range(0, height, step):
        a, n = analytical[start : start + step], numerical[start : start + step]
        mask = close_mask(a, n, rtol, atol)
        if not mask.all():
            close = False
            outside += int((~mask).sum())
        found = worst_candidate(a, n, rtol, atol)
        if found is not None:
            over, element = found
            element = WorstElement(
                element.row + origin[0] + start,
                element.column + origin[1],
                element.actual,
                element.expected,
                element.difference,
                element.allowed,
            )
            candidate = Worst(over, element)
            if candidate.beats(worst, shape[1]):
                worst = candidate
    rows = _inside(printed_indices(shape[0], shape), origin[0], origin[0] + height)
    columns = _inside(printed_indices(shape[1], shape), origin[1], origin[1] + width)
    cut = np.ix_(rows - origin[0], columns - origin[1])
    printed = Printed(rows, columns, np.array(numerical[cut]), np.array(analytical[cut]))
    return TileSummary(close, outside, worst, printed, (numerical.dtype.str, analytical.dtype.str))


@dataclass(frozen=True)
class BlockSummary:
    """A whole block's comparison, from its tiles."""

    shape: tuple[int, int]
    close: bool
    outside: int
    worst: WorstElement | None
    numerical: np.ndarray  # stand-ins: arrays that print as the whole blocks do
    analytical: np.ndarray

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def combine(shape: tuple[int, int], tiles: Iterable[TileSummary]) -> BlockSummary:
    """The block's summary from all its tiles (which cover it)."""
    tiles = list(tiles)
    close, outside, worst = True, 0, None
    for tile in tiles:
        close, outside = close and tile.close, outside + tile.outside
        if tile.worst is not None and tile.worst.beats(worst, shape[1]):
            worst = tile.worst
    dtypes = tiles[0].dtypes if tiles else ("<f8", "<f8")
    numerical = stand_in(shape, np.dtype(dtypes[0]), [(t.printed, t.printed.numerical) for t in tiles])
    analytical = stand_in(shape, np.dtype(dtypes[1]), [(t.printed, t.printed.analytical) for t in tiles])
    return BlockSummary(shape, close, outside, None if worst is None else worst.element, numerical, analytical)


def stand_in_shape(shape: tuple[int, int]) -> tuple[int, int]:
    """The shape of a block's stand-in: the block's own when it prints whole; else as small as
    keeps the print summarized in the same dimensions (above the threshold, and longer than
    both edges where the block is)."""
    if math.prod(shape) <= PRINT_THRESHOLD:
        return shape
    dims = [s if s <= 2 * PRINT_EDGE else 2 * PRINT_EDGE + 1 for s in shape]
    for d in range(2):
        if dims[0] * dims[1] <= PRINT_THRESHOLD:
            dims[d] = min(shape[d], max(dims[d], -(-(PRINT_THRESHOLD + 1) // dims[1 - d])))
    return dims[0], dims[1]


def _placed(indices: np.ndarray, size: int, stand_in: int) -> np.ndarray:
    """Where a block's printed indices go in its stand-in: the leading edge as it is, the
    trailing edge at the stand-in's end."""
    return np.where(indices < PRINT_EDGE, indices, stand_in - (size - indices)) if stand_in < size else indices


def stand_in(shape: tuple[int, int], dtype: np.dtype, pieces: Iterable[tuple[Printed, np.ndarray]]) -> np.ndarray:
    """An array that prints as the block of ``shape`` whose printed elements are ``pieces``:
    the block itself when it prints whole, else its edges around zeros that are never printed."""
    small = stand_in_shape(shape)
    array = np.zeros(small, dtype=dtype)
    for printed, values in pieces:
        rows = _placed(printed.rows, shape[0], small[0])
        columns = _placed(printed.columns, shape[1], small[1])
        array[np.ix_(rows, columns)] = values
    return array
