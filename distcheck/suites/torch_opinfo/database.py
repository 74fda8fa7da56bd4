"""PyTorch's OpInfo databases (``op_db``, and the ``hop_db`` / ``custom_op_db`` lists that some of
the gradient tests also run over), loaded once per process, and the names this suite accepts
for its ops and dtypes."""

from __future__ import annotations

import functools

import torch

from distcheck.suites.base import UsageError
from distcheck.suites.suggest import hint
from distcheck.suites.torch_opinfo.device_seeding import skip_stacks_of_unavailable_backends
from distcheck.suites.torch_opinfo.pytorch_names import CUSTOM_OP_DB, HOP_DB, OP_DB

# the dtypes PyTorch's gradient tests check (allowed_dtypes of their @ops decorator)
DTYPES = {"float64": torch.float64, "complex128": torch.complex128}


# the OpInfo lists of torch.testing._internal (module, list), in the order PyTorch's tests add them
_MODULES = {OP_DB: "common_methods_invocations", HOP_DB: "hop_db", CUSTOM_OP_DB: "custom_op_db"}


@functools.cache
def _tables() -> tuple[dict[str, object], dict[str, str]]:
    import importlib

    tables, databases = {}, {}
    for database, module in _MODULES.items():
        ops = getattr(importlib.import_module(f"torch.testing._internal.{module}"), database)
        for op in ops:
            if op.full_name in tables:
                raise RuntimeError(f"two OpInfos named {op.full_name!r} ({databases[op.full_name]}, {database})")
            tables[op.full_name], databases[op.full_name] = op, database
    skip_stacks_of_unavailable_backends()
    return tables, databases


def op_table() -> dict[str, object]:
    """Every OpInfo of the three lists by ``full_name`` (name, plus ``.variant_test_name`` if
    any: unique across them), op_db's first. Loading it also makes seeding cheaper in this
    process (see :mod:`.device_seeding`)."""
    return _tables()[0]


def database_of(op) -> str:
    """The list ``op`` comes from: :data:`OP_DB`, :data:`HOP_DB` or :data:`CUSTOM_OP_DB`."""
    return _tables()[1][op.full_name]


def op_named(name: str):
    table = op_table()
    if name not in table:
        raise UsageError(f"unknown op {name!r} in op_db{hint(name, table)} (`distcheck list --ops` lists them)")
    return table[name]


def dtype_named(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise UsageError(f"unknown dtype {name!r} for torch-opinfo (choose from {', '.join(DTYPES)})")
    return DTYPES[name]


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
