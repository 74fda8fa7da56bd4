"""Suites of gradient-check cases, by name (see :mod:`distcheck.suites.base` for the interface).

Registering a suite is one line in ``_SUITES``: its name and the class that implements it
(imported only when the suite is used, so that listing suites imports no engine).
"""

from __future__ import annotations

import importlib

from distcheck.suites.base import (
    CHECK_KINDS,
    MODES,
    BuiltCase,
    CaseId,
    CaseInfo,
    CheckCall,
    ExpectedError,
    GroupInfo,
    Selection,
    Suite,
    UsageError,
    enumerate_cases,
    is_grouped,
)

_SUITES = {
    "torch-opinfo": "distcheck.suites.torch_opinfo:TorchOpInfoSuite",
    "tensorplay-opinfo": "distcheck.suites.tensorplay_opinfo:TensorplayOpInfoSuite",
}

__all__ = [
    "CHECK_KINDS",
    "MODES",
    "BuiltCase",
    "CaseId",
    "CaseInfo",
    "CheckCall",
    "ExpectedError",
    "GroupInfo",
    "Selection",
    "Suite",
    "UsageError",
    "enumerate_cases",
    "get_suite",
    "is_grouped",
    "suite_names",
]


def suite_names() -> tuple[str, ...]:
    return tuple(_SUITES)


def get_suite(name: str, mode: str = "fast") -> Suite:
    """The suite called ``name``, in ``mode`` (``fast`` or ``slow``)."""
    if name not in _SUITES:
        raise UsageError(f"unknown suite {name!r} (known: {', '.join(_SUITES)})")
    if mode not in MODES:
        raise UsageError(f"unknown mode {mode!r} (choose from {', '.join(MODES)})")
    module, cls = _SUITES[name].split(":")
    return getattr(importlib.import_module(module), cls)(mode)
