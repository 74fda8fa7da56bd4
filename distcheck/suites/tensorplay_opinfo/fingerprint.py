"""Fingerprints of converted samples: a hash of everything a gradient check sees in the
tensorplay values (structure, non-tensor values, and per tensor its dtype, shape, strides,
``requires_grad`` and the bytes of its values). Equal fingerprints mean the same check of the
same numbers; the runner compares the fingerprint of a case rebuilt in a worker with the one
the driver enumerated."""

from __future__ import annotations

from typing import Any

import tensorplay as tp

from distcheck.engines.tensorplay_engine import to_numpy
from distcheck.suites.fingerprint import fingerprint as structure_fingerprint


def fingerprint(values: Any) -> str:
    """The fingerprint (16 hex digits) of converted sample values."""
    return structure_fingerprint(values, tp.Tensor, _feed_tensor)


def _feed_tensor(digest, value: tp.Tensor) -> None:
    digest.update(f"T {value.dtype} {tuple(value.shape)} {tuple(value.stride())} grad={value.requires_grad}".encode())
    digest.update(to_numpy(value).tobytes())
