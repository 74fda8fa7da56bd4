"""Suites from outside the package: ``MODULE:NAME`` specs and the ``distcheck.suites`` entry points.

A suite is found by a *spec*, the string ``--suite`` takes:

- a built-in suite's name (``torch-opinfo``);
- an installed suite's name: an entry point of group ``distcheck.suites`` (read from package
  metadata: listing them imports nothing; a suite's module is imported only when it is used);
- ``MODULE:NAME``: attribute ``NAME`` (dotted names allowed) of any importable module.

The object found is a suite class or a factory (called with the mode), or a suite object (one
whose mode differs gets ``with_mode(mode)`` if it has it). An installed suite's entry-point name
must be the suite's own name: case ids, reports and rerun commands name suites by it. A loaded suite is wrapped in a
:class:`LoadedSuite`, which pickles as its spec and mode: a Ray worker imports the module and
rebuilds the suite itself (once per process), so the suite's functions never travel and need
not be picklable. A suite that fails to load is a :class:`SuiteLoadError`, one line naming the
package and the exception.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
from dataclasses import dataclass
from typing import Any

from distcheck.devices import CPU
from distcheck.suites.base import SEPARATOR, UsageError, on_device

ENTRY_POINT_GROUP = "distcheck.suites"
_SUITE_ATTRIBUTES = ("name", "mode", "engine", "cases", "build")


class SuiteLoadError(UsageError):
    """A suite's module or object is broken: the command line reports it in one line (exit 2)."""


@dataclass(frozen=True)
class SuiteSource:
    """Where a suite comes from: ``name`` (what ``--suite`` takes), ``target``
    (``module:attribute``) and ``origin`` (``built in``, or the package that registers it)."""

    name: str
    target: str
    origin: str


def is_spec(text: str) -> bool:
    """Whether ``text`` is a ``MODULE:NAME`` spec rather than a suite's name."""
    module, colon, attribute = text.partition(":")
    return bool(colon and module and attribute) and SEPARATOR not in text


def installed_sources() -> list[SuiteSource]:
    """The suites installed packages register (entry points of group ``distcheck.suites``),
    from their metadata: nothing is imported."""
    sources = []
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(entry, "dist", None)
        origin = f"package {dist.name} {dist.version}" if dist is not None else "an installed package"
        sources.append(SuiteSource(entry.name, entry.value, origin))
    return sources


def load(source: SuiteSource, mode: str, device: str = CPU) -> LoadedSuite:
    """The suite ``source`` names, in ``mode`` on ``device``, wrapped to pickle as where it came from."""
    return LoadedSuite(source, on_device(_built(source, mode), device), device)


def _built(source: SuiteSource, mode: str) -> Any:
    """The suite object itself: import, look up, instantiate; every failure as one line."""
    try:
        found = _attribute(source.target)
    except Exception as e:
        raise SuiteLoadError(
            f"suite {source.name!r} ({source.origin}, {source.target}) failed to load: {_one_line(e)}"
        ) from e
    try:
        suite = _in_mode(found, mode)
    except UsageError:
        raise
    except Exception as e:
        raise SuiteLoadError(
            f"suite {source.name!r} ({source.origin}, {source.target}) failed to build in mode {mode!r}: {_one_line(e)}"
        ) from e
    missing = [a for a in _SUITE_ATTRIBUTES if not hasattr(suite, a)]
    if missing:
        raise SuiteLoadError(
            f"suite {source.name!r} ({source.origin}, {source.target}) is not a suite: a {type(suite).__name__} "
            f"without {', '.join(missing)} (expected a Suite class, a factory taking the mode, or a suite object)"
        )
    installed = source.name != source.target  # a MODULE:NAME spec is its own target
    if installed and suite.name != source.name:
        raise SuiteLoadError(
            f"suite {source.name!r} ({source.origin}, {source.target}) is a suite named {suite.name!r}: an installed "
            "suite's entry-point name must be its name (its case ids and reports use it to find it again)"
        )
    if SEPARATOR in str(suite.name) or not suite.name:
        raise SuiteLoadError(
            f"suite {source.name!r} ({source.origin}): bad suite name {suite.name!r} (empty or with '::')"
        )
    return suite


def _attribute(target: str) -> Any:
    module, _, attribute = target.partition(":")
    value: Any = importlib.import_module(module.strip())
    for part in attribute.strip().split("."):
        value = getattr(value, part)
    return value


def _in_mode(found: Any, mode: str) -> Any:
    if all(hasattr(found, a) for a in _SUITE_ATTRIBUTES) and not isinstance(found, type):
        if found.mode == mode:
            return found
        if hasattr(found, "with_mode"):
            return found.with_mode(mode)
        raise UsageError(f"suite {found.name!r} runs in mode {found.mode!r} only (asked for {mode!r})")
    if callable(found):
        return found(mode)
    return found  # not a suite: the caller says what it lacks


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


@functools.cache
def _reloaded(source: SuiteSource, mode: str, device: str) -> Any:
    """The suite rebuilt in this process (a worker): once per process."""
    return on_device(_built(source, mode), device)


def _unpickle(source: SuiteSource, mode: str, device: str = CPU) -> LoadedSuite:
    return LoadedSuite(source, _reloaded(source, mode, device), device)


class LoadedSuite:
    """A suite from outside the package: behaves as the suite it wraps (every attribute is the
    suite's, so optional methods stay optional), and pickles as its source and mode. ``spec``
    is what ``--suite`` takes to load it again (a report records it for a rerun or a resume)."""

    def __init__(self, source: SuiteSource, suite: Any, device: str = CPU):
        self.source, self.suite, self.device = source, suite, device

    @property
    def spec(self) -> str:
        return self.source.name

    def prepare(self) -> None:
        prepare = getattr(self.suite, "prepare", None)
        if prepare is not None:
            prepare()

    def __getattr__(self, attribute: str) -> Any:
        if attribute in ("source", "suite", "device"):  # not set yet (during unpickling): never recurse
            raise AttributeError(attribute)
        return getattr(self.suite, attribute)

    def __reduce__(self):
        return _unpickle, (self.source, self.suite.mode, self.device)

    def __repr__(self) -> str:
        return f"LoadedSuite({self.spec!r}, {self.source.origin}, {self.suite!r})"
