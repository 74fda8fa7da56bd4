"""The Jacobian blocks behind a "Jacobian mismatch" failure, kept on the raised error.

Reports draw them (heatmaps of numerical, analytical and |analytical − numerical| against the
tolerance), so the reducer attaches the blocks it compared — in fast mode, the full blocks it
recomputes for the message — to the GradcheckError as ``error.blocks``.
"""

from __future__ import annotations

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


def attach(error: Exception, blocks: FailureBlocks | None) -> Exception:
    """``error`` with ``error.blocks`` set (when the blocks are full 2-D Jacobian blocks)."""
    if blocks is not None and blocks.numerical.ndim == 2 and blocks.analytical.shape == blocks.numerical.shape:
        error.blocks = blocks
    return error
