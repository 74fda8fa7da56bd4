"""The block budget: the memory that one piece of a check's work may hold in one process (a
unit's results, a block comparison, a batch of vectorized evaluations), ``$DISTCHECK_BLOCK_MB``
megabytes, else 64 MB."""

from __future__ import annotations

import os

BLOCK_MB_VARIABLE = "DISTCHECK_BLOCK_MB"
DEFAULT_BLOCK_BYTES = 64 * 2**20


def default_block_bytes() -> float:
    """The per-process block budget: ``$DISTCHECK_BLOCK_MB`` megabytes, else 64 MB."""
    text = os.environ.get(BLOCK_MB_VARIABLE, "").strip()
    return float(text) * 2**20 if text else DEFAULT_BLOCK_BYTES
