"""Fingerprints: a hash of everything a gradient check sees in a sample's values.

The structure (containers, kwarg names, non-tensor values) is walked here; each suite says
how to hash one of its engine's tensors. Equal fingerprints mean the same check of the same
numbers: the runner compares the fingerprint of a case rebuilt in a worker with the one the
driver enumerated.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Any

ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def fingerprint(values: Any, tensor_type: type, feed_tensor: Callable[[Any, Any], None]) -> str:
    """The fingerprint (16 hex digits) of ``values``; ``feed_tensor(digest, tensor)`` hashes
    each ``tensor_type`` instance."""
    digest = hashlib.sha256()

    def feed(value: Any) -> None:
        if isinstance(value, tensor_type):
            feed_tensor(digest, value)
        elif isinstance(value, (list, tuple)):
            digest.update(f"{type(value).__name__}[{len(value)}](".encode())
            for item in value:
                feed(item)
            digest.update(b")")
        elif isinstance(value, dict):
            digest.update(f"dict[{len(value)}](".encode())
            for key, item in value.items():
                digest.update(f"{key!r}:".encode())
                feed(item)
            digest.update(b")")
        elif callable(value) and hasattr(value, "__qualname__"):
            digest.update(f"callable {getattr(value, '__module__', '')}.{value.__qualname__}".encode())
        else:  # numbers, strings, dtypes, slices...: their repr, without memory addresses
            digest.update(ADDRESS.sub("", repr(value)).encode())

    feed(values)
    return digest.hexdigest()[:16]
