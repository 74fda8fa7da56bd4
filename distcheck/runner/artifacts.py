"""Failure artifacts of a suite run: the Jacobian blocks of each failed comparison.

A worker keeps the blocks a failure compared (``error.blocks``, see
:mod:`distcheck.reduce.failure_blocks`), bounded to :data:`MAX_BYTES` a case — a window around
the worst element of a larger block — and sends them with the case's outcome. The driver writes
them, as each record arrives, to ``FOLDER/<case id made safe>.npz`` and keeps only the file name
in the record: a run with 16,000 failures never holds their blocks in memory. Blocks are kept
only while a folder is open (:func:`storing`, opened where the run starts); otherwise they are
dropped.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from distcheck.numerics.compare import worst_element
from distcheck.reduce.failure_blocks import FailureBlocks

MAX_BYTES = 2**20  # both blocks of a case together


@dataclass(frozen=True)
class CaseBlocks:
    """The blocks of a failed case as kept: ``numerical`` and ``analytical`` are the window
    ``[row0:row0+h, col0:col0+w]`` of blocks of ``shape`` (the whole blocks when they fit);
    ``worst``: the (row, column) of the largest violation in the whole block."""

    output_index: int
    input_index: int
    numerical: np.ndarray
    analytical: np.ndarray
    atol: float
    rtol: float
    shape: tuple[int, int]
    row0: int
    col0: int
    worst: tuple[int, int]
    part: str = ""
    mode: str = "backward"

    def arrays(self) -> dict[str, np.ndarray]:
        """The ``.npz`` contents."""
        return {name: np.asarray(getattr(self, name)) for name in self.__dataclass_fields__}

    @classmethod
    def from_arrays(cls, arrays) -> CaseBlocks:
        def value(name):
            x = arrays[name]
            return x if x.ndim == 2 or name in ("shape", "worst") else x.item()

        fields = {name: value(name) for name in cls.__dataclass_fields__}
        fields["shape"] = tuple(int(v) for v in fields["shape"])
        fields["worst"] = tuple(int(v) for v in fields["worst"])
        return cls(**fields)


def _worst(blocks: FailureBlocks) -> tuple[int, int]:
    worst = worst_element(blocks.analytical, blocks.numerical, blocks.rtol, blocks.atol)
    if worst is not None:
        return worst.row, worst.column
    difference = np.nan_to_num(np.abs(blocks.analytical - blocks.numerical), nan=np.inf)
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(difference)), difference.shape))


def _span(centre: int, size: int, total: int) -> int:
    """The start of a window of ``size`` out of ``total`` around ``centre``."""
    return min(max(centre - size // 2, 0), total - size)


def bounded(blocks: FailureBlocks, max_bytes: int = MAX_BYTES) -> CaseBlocks:
    """The blocks, or a window of them around the worst element, in at most ``max_bytes``."""
    rows, columns = blocks.numerical.shape
    itemsize = max(blocks.numerical.itemsize, blocks.analytical.itemsize)
    budget = max(1, max_bytes // (2 * itemsize))  # elements of each block
    worst = _worst(blocks)
    width = min(columns, max(1, math.isqrt(budget)))
    height = min(rows, budget // width)
    width = min(columns, budget // height)
    row0, col0 = _span(worst[0], height, rows), _span(worst[1], width, columns)
    window = (slice(row0, row0 + height), slice(col0, col0 + width))
    return CaseBlocks(
        blocks.output_index,
        blocks.input_index,
        np.ascontiguousarray(blocks.numerical[window]),
        np.ascontiguousarray(blocks.analytical[window]),
        float(blocks.atol),
        float(blocks.rtol),
        (rows, columns),
        row0,
        col0,
        worst,
        blocks.part or "",
        blocks.mode,
    )


def file_name(case_id: str) -> str:
    """A file name for a case id: its safe characters and a short hash (distinct ids never share one)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", case_id)[:150]
    return f"{safe}-{hashlib.sha256(case_id.encode()).hexdigest()[:8]}.npz"


def load(path: str) -> CaseBlocks:
    with np.load(path, allow_pickle=False) as arrays:
        return CaseBlocks.from_arrays(arrays)


_folder: str | None = None
_lock = threading.Lock()


@contextlib.contextmanager
def storing(folder: str | None) -> Iterator[None]:
    """Keep failure blocks in ``folder`` (created) while the context is open (None: drop them)."""
    global _folder
    if folder is not None:
        os.makedirs(folder, exist_ok=True)
    with _lock:
        previous, _folder = _folder, folder
    try:
        yield
    finally:
        with _lock:
            _folder = previous


def store(case_id: str, blocks: CaseBlocks | None) -> str | None:
    """Write a case's blocks to the open folder: the file name, or None (nothing kept)."""
    folder = _folder
    if blocks is None or folder is None:
        return None
    name = file_name(case_id)
    np.savez_compressed(os.path.join(folder, name), **blocks.arrays())
    return name
