"""Failure artifacts of a suite run: the Jacobian blocks of each failed comparison.

A case keeps the blocks a failure compared (``error.blocks``, see
:mod:`distcheck.reduce.failure_blocks`), bounded to :data:`MAX_BYTES` — a window around the
worst element of a larger block — where it runs; its record names their file, and they go with
it to the driver as that file's bytes (:func:`encoded`: compressed where the case ran, so the
driver's work for a failure is one write), which it writes to the run's :class:`BlockStore` (the
run folder's ``blocks/``, a local folder or a prefix in an object store): a run with 16,000
failures never holds their blocks in memory. A run without a store keeps none.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import re

import numpy as np

from distcheck.numerics.compare import worst_element
from distcheck.reduce.failure_blocks import MAX_WINDOW_BYTES, FailureBlocks, WindowedBlocks, window_of
from distcheck.storage import location

MAX_BYTES = MAX_WINDOW_BYTES  # both blocks of a case together


@dataclasses.dataclass(frozen=True)
class CaseBlocks:
    """The blocks of a failed case as kept: ``window`` holds the blocks' rows
    ``row0 : row0 + height`` and columns ``col0 : col0 + width`` (the whole blocks when they fit)
    of blocks of ``shape``; ``worst``: the (row, column) of the largest violation in the whole."""

    window: FailureBlocks
    shape: tuple[int, int]
    row0: int
    col0: int
    worst: tuple[int, int]

    def arrays(self) -> dict[str, np.ndarray]:
        """The ``.npz`` contents (no pickled objects: ``part`` None is stored as "")."""
        kept = {f.name: getattr(self.window, f.name) for f in dataclasses.fields(FailureBlocks)}
        kept["part"] = kept["part"] or ""
        kept.update(shape=self.shape, row0=self.row0, col0=self.col0, worst=self.worst)
        return {name: np.asarray(value) for name, value in kept.items()}

    @classmethod
    def from_arrays(cls, arrays) -> CaseBlocks:
        def value(name: str):
            x = arrays[name]
            return x if x.ndim else x.item()

        window = {f.name: value(f.name) for f in dataclasses.fields(FailureBlocks)}
        window["part"] = window["part"] or None
        pair = lambda name: tuple(int(v) for v in arrays[name])  # noqa: E731
        return cls(FailureBlocks(**window), pair("shape"), value("row0"), value("col0"), pair("worst"))


def _worst(blocks: FailureBlocks) -> tuple[int, int]:
    worst = worst_element(blocks.analytical, blocks.numerical, blocks.rtol, blocks.atol)
    if worst is not None:
        return worst.row, worst.column
    difference = np.nan_to_num(np.abs(blocks.analytical - blocks.numerical), nan=np.inf)
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(difference)), difference.shape))


def bounded(blocks: FailureBlocks, max_bytes: int = MAX_BYTES) -> CaseBlocks:
    """The blocks, or a window of them around the worst element, in at most ``max_bytes``
    (blocks compared block by block arrive as that window already)."""
    if isinstance(blocks, WindowedBlocks):
        window = FailureBlocks(**{f.name: getattr(blocks, f.name) for f in dataclasses.fields(FailureBlocks)})
        return CaseBlocks(_plain(window), blocks.shape, blocks.row0, blocks.col0, blocks.worst)
    if blocks.numerical.size == 0 or blocks.analytical.size == 0:  # nothing to centre a window on
        return CaseBlocks(_plain(blocks), blocks.numerical.shape, 0, 0, (0, 0))
    itemsize = max(blocks.numerical.itemsize, blocks.analytical.itemsize)
    worst = _worst(blocks)
    row0, col0, height, width = window_of(blocks.numerical.shape, itemsize, worst, max_bytes)
    cut = (slice(row0, row0 + height), slice(col0, col0 + width))
    window = dataclasses.replace(blocks, numerical=blocks.numerical[cut], analytical=blocks.analytical[cut])
    return CaseBlocks(_plain(window), blocks.numerical.shape, row0, col0, worst)


def _plain(window: FailureBlocks) -> FailureBlocks:
    return dataclasses.replace(
        window,
        numerical=np.ascontiguousarray(window.numerical),
        analytical=np.ascontiguousarray(window.analytical),
        atol=float(window.atol),
        rtol=float(window.rtol),
    )


def encoded(blocks: CaseBlocks) -> bytes:
    """The blocks as their file holds them (a compressed ``.npz``; :func:`load` reads it)."""
    data = io.BytesIO()
    np.savez_compressed(data, **blocks.arrays())
    return data.getvalue()


def file_name(case_id: str) -> str:
    """A file name for a case id: its safe characters and a short hash (distinct ids never share one)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", case_id)[:150]
    return f"{safe}-{hashlib.sha256(case_id.encode()).hexdigest()[:8]}.npz"


def load(path) -> CaseBlocks:
    """The blocks in the file or object at ``path`` (a path or URL), or in an open binary file."""
    source = io.BytesIO(location.read_bytes(path)) if isinstance(path, str) else path
    with np.load(source, allow_pickle=False) as arrays:
        return CaseBlocks.from_arrays(arrays)


@dataclasses.dataclass(frozen=True)
class BlockStore:
    """Where a run keeps its cases' failure blocks: ``folder`` (a path, made with the first
    blocks, or a store's URL), one file per case (:func:`file_name`), each written whole."""

    folder: str

    def write(self, name: str, data: bytes) -> None:
        """The file ``name`` (its bytes :func:`encoded` where the case ran)."""
        location.write_bytes(location.join(self.folder, name), data)
