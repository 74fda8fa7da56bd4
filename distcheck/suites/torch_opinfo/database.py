"""PyTorch's OpInfo database (``common_methods_invocations.op_db``), loaded once per process,
and the names this suite accepts for its ops and dtypes."""

from __future__ import annotations

import difflib
import functools

import torch

from distcheck.suites.base import UsageError
from distcheck.suites.torch_opinfo.device_seeding import skip_stacks_of_unavailable_backends

# the dtypes PyTorch's gradient tests check (allowed_dtypes of their @ops decorator)
DTYPES = {"float64": torch.float64, "complex128": torch.complex128}


@functools.cache
def op_table() -> dict[str, object]:
    """Every OpInfo by ``full_name`` (name, plus ``.variant_test_name`` if any: unique).
    Loading it also makes seeding cheaper in this process (see :mod:`.device_seeding`)."""
    from torch.testing._internal.common_methods_invocations import op_db

    skip_stacks_of_unavailable_backends()

    return {op.full_name: op for op in op_db}


def op_named(name: str):
    table = op_table()
    if name not in table:
        close = difflib.get_close_matches(name, table, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise UsageError(f"unknown op {name!r} in op_db{hint}")
    return table[name]


def dtype_named(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise UsageError(f"unknown dtype {name!r} for torch-opinfo (choose from {', '.join(DTYPES)})")
    return DTYPES[name]


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
