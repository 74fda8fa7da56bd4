"""The Jacobian blocks behind a "Jacobian mismatch" failure, kept on the raised error.

Reports draw them (heatmaps of numerical, analytical and |analytical − numerical| against the
tolerance), so the reducer attaches the blocks it compared — in fast mode, the full blocks it
recomputes for the message — to the GradcheckError as ``error.blocks``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from distcheck.kinds import Mode, Part


@dataclass(frozen=True)
class FailureBlocks:
    """One failed comparison: rows are input ``input_index``'s elements, columns output
    ``output_index``'s (torch's layout). ``part``: set when a complex output was checked as
    two real functions, else None; ``mode``: how the analytical block was computed."""

    output_index: int
    input_index: int
    numerical: np.ndarray
    analytical: np.ndarray
    atol: float
    rtol: float
    part: Part | None = None
    mode: Mode = Mode.BACKWARD

    @classmethod
    def of(cls, pair, numerical: np.ndarray, analytical: np.ndarray, mode: Mode) -> FailureBlocks:
        """The blocks of ``pair`` (a :class:`~distcheck.reduce.messages.BlockPair`: which output
        and input, the tolerances, the complex part), computed in ``mode``."""
        i, k = pair.input_index, pair.output_index
        return cls(k, i, numerical, analytical, pair.atol, pair.rtol, pair.part, mode)


def attach(error: Exception, blocks: FailureBlocks | None) -> Exception:
    """``error`` with ``error.blocks`` set (when the blocks are full 2-D Jacobian blocks)."""
    if blocks is not None and blocks.numerical.ndim == 2 and blocks.analytical.shape == blocks.numerical.shape:
        error.blocks = blocks
    return error


@dataclass(frozen=True)
class WindowedBlocks(FailureBlocks):
    """A window of blocks too large to keep whole (compared block by block): ``numerical`` and
    ``analytical`` hold rows ``row0:`` and columns ``col0:`` of blocks of ``shape``, whose
    largest violation is at ``worst``."""

    shape: tuple[int, int] = (0, 0)
    row0: int = 0
    col0: int = 0
    worst: tuple[int, int] = (0, 0)

    @classmethod
    def of(cls, blocks: FailureBlocks, shape, row0: int, col0: int, worst) -> WindowedBlocks:
        fields = {f.name: getattr(blocks, f.name) for f in dataclasses.fields(FailureBlocks)}
        return cls(**fields, shape=tuple(shape), row0=row0, col0=col0, worst=tuple(worst))


MAX_WINDOW_BYTES = 2**20  # both blocks of a failure's window together


def window_of(
    shape: tuple[int, int], itemsize: int, worst: tuple[int, int], max_bytes: int = MAX_WINDOW_BYTES
) -> tuple[int, int, int, int]:
    """``(row0, col0, height, width)``: the window of blocks of ``shape`` kept around the
    worst element, both blocks in at most ``max_bytes`` (the whole blocks when they fit)."""
    rows, columns = shape
    budget = max(1, max_bytes // (2 * itemsize))  # elements of each block
    width = min(columns, max(1, math.isqrt(budget)))
    height = min(rows, budget // width)
    width = min(columns, budget // height)
    return _span(worst[0], height, rows), _span(worst[1], width, columns), height, width


def _span(centre: int, size: int, total: int) -> int:
    """The start of a window of ``size`` out of ``total`` around ``centre``."""
    return min(max(centre - size // 2, 0), total - size)
