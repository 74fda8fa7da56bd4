"""What units know of the tensors they work on (small, picklable records)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class OutputSlot:
    """A function output whose Jacobian block a unit computes."""

    numel: int
    dtype: str  # numpy dtype name of the Jacobian block


@dataclass(frozen=True)
class InputSlot:
    """A differentiable input."""

    position: int  # among the function's inputs
    shape: tuple[int, ...]
    dtype: str  # numpy dtype name

    @property
    def numel(self) -> int:
        return math.prod(self.shape)
