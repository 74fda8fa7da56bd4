"""Suites of gradient-check cases, by name (see :mod:`distcheck.suites.base` for the interface).

Registering a built-in suite is one line in ``_SUITES``: its name and the class that implements
it (imported only when the suite is used, so that listing suites imports no engine). Suites
from outside the package (installed packages' ``distcheck.suites`` entry points, and
``MODULE:NAME`` specs) are found by :mod:`distcheck.suites.loading`; a library declares one in
a few lines with :mod:`distcheck.suites.declare`.
"""

from __future__ import annotations

import importlib

from distcheck.devices import DeviceError, parse_device
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
    on_device,
)
from distcheck.suites.loading import SuiteLoadError, SuiteSource, installed_sources, is_spec, load

DEFAULT_SUITE = "torch-opinfo"  # what --suite defaults to; the suite of a case id given without one
_SUITES = {
    "torch-opinfo": "distcheck.suites.torch_opinfo:TorchOpInfoSuite",
    "tensorplay-opinfo": "distcheck.suites.tensorplay_opinfo:TensorplayOpInfoSuite",
}

__all__ = [
    "CHECK_KINDS",
    "DEFAULT_SUITE",
    "MODES",
    "BuiltCase",
    "CaseId",
    "CaseInfo",
    "CheckCall",
    "ExpectedError",
    "GroupInfo",
    "Selection",
    "Suite",
    "SuiteLoadError",
    "SuiteSource",
    "UsageError",
    "enumerate_cases",
    "get_suite",
    "is_grouped",
    "on_device",
    "spec_of",
    "suite_names",
    "suite_sources",
]


def suite_sources() -> list[SuiteSource]:
    """Every suite by name: the built-in ones, then those installed packages register (read
    from their metadata; nothing is imported). An installed suite named as a built-in one is
    listed with its origin saying that it is shadowed."""
    sources = [SuiteSource(name, target, "built in") for name, target in _SUITES.items()]
    for source in installed_sources():
        if source.name in _SUITES:
            source = SuiteSource(source.name, source.target, f"{source.origin}, shadowed by the built-in suite")
        sources.append(source)
    return sources


def suite_names() -> tuple[str, ...]:
    """The names ``--suite`` takes: built-in and installed suites (not ``MODULE:NAME`` specs)."""
    return tuple(dict.fromkeys(source.name for source in suite_sources()))


def get_suite(name: str, mode: str = "fast", device: str = "cpu") -> Suite:
    """The suite ``name`` names, in ``mode`` (``fast`` or ``slow``) on ``device`` (``cpu``,
    ``cuda``, ``cuda:N``: one the suite declares): a built-in suite's name, an installed suite's
    name, or ``MODULE:NAME`` (see :mod:`distcheck.suites.loading`)."""
    if mode not in MODES:
        raise UsageError(f"unknown mode {mode!r} (choose from {', '.join(MODES)})")
    try:
        device = parse_device(device)
    except DeviceError as e:
        raise UsageError(str(e)) from None
    if name in _SUITES:
        module, cls = _SUITES[name].split(":")
        return on_device(getattr(importlib.import_module(module), cls)(mode), device)
    if is_spec(name):
        return load(SuiteSource(name, name, "module"), mode, device)
    installed = [source for source in installed_sources() if source.name == name]
    if len(installed) > 1:
        origins = "; ".join(f"{source.origin} ({source.target})" for source in installed)
        raise UsageError(f"suite {name!r} is registered by more than one package: {origins}")
    if not installed:
        known = ", ".join(suite_names())
        raise UsageError(f"unknown suite {name!r} (known: {known}; or MODULE:NAME for a suite in any module)")
    return load(installed[0], mode, device)


def spec_of(suite: Suite) -> str:
    """What ``get_suite`` (``--suite``) takes to load ``suite`` again: its name for a built-in
    or installed suite, ``MODULE:NAME`` for one loaded from a module. A report records it so
    that a rerun or a resume finds the suite."""
    return getattr(suite, "spec", suite.name)
