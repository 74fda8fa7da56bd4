"""What units know of the tensors they work on (small, picklable records)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np


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


def slots_bytes(slots: Iterable[OutputSlot | InputSlot | None]) -> int:
    """Bytes of one item (a column or row) of the Jacobian blocks of ``slots`` (None: not computed)."""
    return sum(s.numel * np.dtype(s.dtype).itemsize for s in slots if s is not None)
