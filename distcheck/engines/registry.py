"""Which engines there are, and which engine checks what: every engine is registered here.

An engine is known by an :class:`EngineSource` (its name, its class as ``module:Class``, and the
library whose arrays it checks), from one of three places, in this order:

- built in: torch, tensorplay, JAX and numpy (:data:`BUILT_IN`);
- installed: the entry points of group ``distcheck.engines`` of installed packages
  (``NAME = "module:Class"``), read from their metadata: listing them imports nothing;
- registered by a program: :func:`register_engine`.

Engine modules are imported only when a check needs them, so that ``import distcheck`` does not
import torch. An installed engine's library (and array type) is read from its class when it is
loaded (:attr:`Engine.library`, :attr:`Engine.array_type`), so :func:`engine_of` loads installed
engines only for a value no known library's arrays are.

An engine travels to a Ray worker with the check's subject as an :class:`EngineTicket`: its
source (a worker registers an engine it does not know, as a program registered it on the
driver) and its state (:meth:`Engine.state`, e.g. JAX's 64-bit mode), restored in the worker
before the subject's inputs are rebuilt.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distcheck.engines.base import Engine

ENTRY_POINT_GROUP = "distcheck.engines"


@dataclass(frozen=True)
class EngineSource:
    """Where an engine comes from: ``name``, ``target`` (``module:Class``), ``library`` (the
    top-level package of the arrays it checks: what a Ray worker imports to be warm, and whose
    version a run records) and ``array_type`` (that package's attribute: the array class);
    ``origin``: ``built in``, the package that installs it, or ``registered``. An installed
    engine's library and array type are None until it is loaded."""

    name: str
    target: str
    library: str | None = None
    array_type: str | None = None
    origin: str = "registered"


_HERE = "distcheck.engines"
BUILT_IN = (
    EngineSource("torch", f"{_HERE}.torch_engine:TorchEngine", "torch", "Tensor", "built in"),
    EngineSource("tensorplay", f"{_HERE}.tensorplay_engine:TensorplayEngine", "tensorplay", "Tensor", "built in"),
    EngineSource("jax", f"{_HERE}.jax_engine:JaxEngine", "jax", "Array", "built in"),
    EngineSource("numpy", f"{_HERE}.numpy_engine:NumpyEngine", "numpy", "ndarray", "built in"),
)
_sources: dict[str, EngineSource] = {}  # every known engine, in registration order
_loaded: dict[str, Engine] = {}
_installed_read = False


class EngineLoadError(ImportError):
    """An engine's module or class could not be loaded (one line: which engine, from where, why)."""


def _known() -> dict[str, EngineSource]:
    global _installed_read
    if not _installed_read:
        _installed_read = True
        for source in BUILT_IN:
            _sources.setdefault(source.name, source)
        for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            dist = getattr(entry, "dist", None)
            origin = f"package {dist.name} {dist.version}" if dist is not None else "an installed package"
            _sources.setdefault(entry.name, EngineSource(entry.name, entry.value, origin=origin))
    return _sources


def sources() -> tuple[EngineSource, ...]:
    """Every engine this process knows: built in, installed, registered."""
    return tuple(_known().values())


def engine_names() -> tuple[str, ...]:
    return tuple(_known())


def register_engine(name: str, target: str, library: str, array_type: str) -> EngineSource:
    """Make engine ``name`` known to this process (and to the Ray workers its checks run on):
    ``target`` is its class as ``module:Class`` (an importable module: workers import it),
    ``library`` the top-level package of the arrays it checks and ``array_type`` the array
    class's name in it. Registering a known name again with another source is an error."""
    source = EngineSource(name, target, library, array_type)
    known = _known().get(name)
    if known is not None and (known.target, known.library, known.array_type) != (target, library, array_type):
        raise ValueError(f"engine {name!r} is already registered ({known.origin}: {known.target})")
    if known is None:
        _sources[name] = source
    return _sources[name]


def get_engine(name: str) -> Engine:
    """The engine called ``name`` (importing its library on first use)."""
    engine = _loaded.get(name)
    if engine is None:
        source = _known().get(name)
        if source is None:
            raise ValueError(f"unknown engine {name!r}; known: {', '.join(_known())}")
        engine = _loaded[name] = _load(source)
        if source.library is None:  # an installed engine: its class says what it checks
            _sources[name] = replace(source, library=engine.library, array_type=engine.array_type)
    return engine


def _load(source: EngineSource) -> Engine:
    module, _, attribute = source.target.partition(":")
    try:
        found: Any = importlib.import_module(module)
        for part in attribute.split("."):
            found = getattr(found, part)
        engine = found()
        if engine.name != source.name:
            raise ValueError(f"the engine registered as {source.name!r} calls itself {engine.name!r}")
        return engine
    except Exception as e:
        reason = f"{type(e).__name__}: {e}".splitlines()[0]
        where = f"{source.origin}, {source.target}"
        raise EngineLoadError(f"engine {source.name!r} ({where}) failed to load: {reason}") from e


def libraries() -> tuple[str, ...]:
    """The libraries of the engines known (and loaded, for installed ones): what a Ray worker
    imports, of those the driver has imported, to be warm."""
    return tuple(s.library for s in _known().values() if s.library is not None)


def library_engines() -> tuple[str, ...]:
    """The engines whose library this process has imported."""
    return tuple(s.name for s in _known().values() if s.library is not None and s.library in sys.modules)


_PLAIN = (bool, int, float, complex, str, bytes, type(None), tuple, list, dict)


def engine_of(value: Any) -> str | None:
    """The name of the engine whose array type ``value`` is, without importing any library
    (installed engines not loaded yet are loaded for a value no other engine owns)."""
    for source in _known().values():
        if source.library is not None and _is_array(source, value):
            return source.name
    if isinstance(value, _PLAIN):
        return None
    for source in [s for s in _known().values() if s.library is None]:
        if get_engine(source.name).is_tensor(value):
            return source.name
    return None


def _is_array(source: EngineSource, value: Any) -> bool:
    lib = sys.modules.get(source.library)
    array_type = getattr(lib, source.array_type, None) if lib is not None else None
    return array_type is not None and isinstance(value, array_type)


def engine_for(func: Callable, inputs: tuple) -> Engine:
    """The engine of a check: the library of the inputs that require gradients. Arrays of other
    libraries are constants that pass through untouched (as torch's gradcheck hands a numpy
    array to the function); inputs of two libraries that both require gradients cannot be checked."""
    found: dict[str, list[int]] = {}
    for position, value in enumerate(inputs):
        name = engine_of(value)
        if name is not None:
            found.setdefault(name, []).append(position)
    if not found:
        raise ValueError(
            "gradcheck expects at least one input tensor to require gradient, but none of the inputs "
            f"is a tensor ({_array_types()})"
        )
    if len(found) == 1:
        return get_engine(next(iter(found)))
    differentiated = [
        name
        for name, positions in found.items()
        if any(get_engine(name).requires_grad(inputs[p], func, p) for p in positions)
    ]
    if len(differentiated) > 1:
        raise TypeError(
            "gradcheck inputs of several engines require gradients: "
            f"{', '.join(sorted(differentiated))}; one check differentiates one engine's tensors"
        )
    return get_engine(differentiated[0] if differentiated else next(iter(found)))


def _array_types() -> str:
    """The array types of the known engines, for messages: "torch.Tensor, ... or numpy.ndarray"."""
    named = [f"{s.library}.{s.array_type}" if s.library is not None else f"{s.name}'s arrays" for s in sources()]
    return named[0] if len(named) == 1 else f"{', '.join(named[:-1])} or {named[-1]}"


class EngineTicket:
    """An engine as it travels to a worker: unpickled, it registers its source there (if the
    worker does not know the engine) and restores the engine's state, and becomes its name."""

    def __init__(self, name: str):
        self.name = name

    def __reduce__(self):
        source = _known()[self.name]
        return _arrive, (source, get_engine(self.name).state())


def _arrive(source: EngineSource, state: Any) -> str:
    if source.name not in _known():
        _sources[source.name] = source
    get_engine(source.name).restore(state)
    return source.name
