"""OpInfo's own Python helpers run on tensorplay: a function of PyTorch's test code (an op's
lambda, a ``gradcheck_wrapper``, a sample's ``output_process_fn_grad``) rebuilt with the name
``torch`` bound to the ``tensorplay`` module.

These helpers are duck-typed Python over tensors (``lambda x: x.T``, ``op(input + input.mH)``,
``lambda weight, idx, **kw: torch.nn.functional.embedding(idx, weight, **kw)``): with ``torch``
meaning ``tensorplay``, which mirrors torch's API, they mean the same for tensorplay tensors.
The translation is static and runs nothing:

- the global names the code reads (nested lambdas and comprehensions included) get new values:
  a torch module becomes the tensorplay module of the same path; a Python function of torch's
  test code is translated in turn, or replaced by its tensorplay version if it has one
  (:mod:`~distcheck.suites.tensorplay_opinfo.helpers`); other values (numbers,
  ``functools.partial``, numpy, ...) are kept;
- closure cells that hold Python functions are translated likewise;
- every attribute chain read from a torch module (``torch.nn.functional.embedding``) must
  resolve in tensorplay, and no other torch callable may be read: otherwise the helper is
  :class:`Untranslatable`, with a message naming what tensorplay lacks, and the suite skips its
  cases with that reason instead of running them into an ``AttributeError``.
"""

from __future__ import annotations

import dis
import importlib
import types
from collections.abc import Callable, Iterator
from typing import Any

import tensorplay as tp

from distcheck.suites.tensorplay_opinfo.helpers import REPLACEMENTS

_ATTRIBUTE_READS = ("LOAD_ATTR", "LOAD_METHOD")


class Untranslatable(LookupError):
    """A helper uses something of torch that tensorplay lacks (the message says what)."""


class MissingAttribute(AttributeError):
    """``path`` (from the root :func:`resolve` was given) does not exist."""

    def __init__(self, path: str):
        super().__init__(f"no {path}")
        self.path = path


def resolve(path: str, root: Any = tp) -> Any:
    """``root.a.b.c`` for ``path`` ``"a.b.c"``, importing tensorplay submodules on the way
    (``tensorplay.nn.functional``, ``tensorplay.linalg``...); raises :class:`MissingAttribute`."""
    value, parts = root, path.split(".")
    for depth, part in enumerate(parts):
        if not hasattr(value, part) and isinstance(value, types.ModuleType):
            try:
                importlib.import_module(f"{value.__name__}.{part}")
            except ImportError:
                pass
        if not hasattr(value, part):
            raise MissingAttribute(".".join(parts[: depth + 1]))
        value = getattr(value, part)
    return value


def translate(function: Callable) -> Callable:
    """``function`` with tensorplay in place of torch (see the module's docstring); raises
    :class:`Untranslatable`."""
    return _Translator().function(function)


def _is_torch_module(value: Any) -> bool:
    return isinstance(value, types.ModuleType) and (value.__name__ == "torch" or value.__name__.startswith("torch."))


def _from_torch_code(function: Any) -> bool:
    """A Python function of torch's test code (``torch.testing``)."""
    return isinstance(function, types.FunctionType) and function.__module__.startswith("torch.testing")


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from _code_objects(constant)


def _global_reads(code: types.CodeType) -> Iterator[tuple[str, tuple[str, ...]]]:
    """``(name, attribute chain)`` for each global read of the code: ``torch.nn.functional.x``
    gives ``("torch", ("nn", "functional", "x"))``."""
    for inner in _code_objects(code):
        instructions = list(dis.get_instructions(inner))
        for k, instruction in enumerate(instructions):
            if instruction.opname not in ("LOAD_GLOBAL", "LOAD_NAME"):
                continue
            chain = []
            for following in instructions[k + 1 :]:
                if following.opname not in _ATTRIBUTE_READS:
                    break
                chain.append(following.argval)
            yield instruction.argval, tuple(chain)


class _Translator:
    def __init__(self):
        self._done: dict[int, Callable] = {}  # translated functions, by id of torch's

    def function(self, function: Callable) -> Callable:
        if not isinstance(function, types.FunctionType):
            raise Untranslatable(f"{function!r} is not a Python function")
        replacement = REPLACEMENTS.get((function.__module__, function.__qualname__))
        if replacement is not None:
            return replacement
        if id(function) in self._done:
            return self._done[id(function)]
        old = function.__globals__
        namespace: dict[str, Any] = {"__builtins__": old.get("__builtins__", __builtins__), "__name__": old["__name__"]}
        translated = types.FunctionType(
            function.__code__, namespace, function.__name__, function.__defaults__, self._closure(function)
        )
        translated.__kwdefaults__ = function.__kwdefaults__
        translated.__qualname__ = function.__qualname__
        self._done[id(function)] = translated
        for name, chain in _global_reads(function.__code__):
            if name not in namespace:
                if name not in old:
                    continue  # a builtin
                namespace[name] = self._value(old[name], name)
            if isinstance(namespace[name], types.ModuleType) and chain:
                try:
                    resolve(".".join(chain), namespace[name])
                except MissingAttribute as e:
                    prefix = namespace[name].__name__.removeprefix("tensorplay").lstrip(".")
                    missing = f"{prefix}.{e.path}" if prefix else e.path
                    raise Untranslatable(f"tensorplay has no {missing} (it calls {name}.{'.'.join(chain)})") from None
        return translated

    def _closure(self, function: types.FunctionType) -> tuple | None:
        if function.__closure__ is None:
            return None
        cells = []
        for cell in function.__closure__:
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell (a name bound later in the enclosing function)
                cells.append(types.CellType())
                continue
            cells.append(types.CellType(self.function(value) if _from_torch_code(value) else value))
        return tuple(cells)

    def _value(self, value: Any, name: str) -> Any:
        if _is_torch_module(value):
            path = value.__name__.removeprefix("torch").lstrip(".")
            try:
                return resolve(path) if path else tp
            except MissingAttribute:
                raise Untranslatable(f"tensorplay has no {path} module (it uses {value.__name__})") from None
        if _from_torch_code(value):
            return self.function(value)
        if callable(value) and str(getattr(value, "__module__", "")).split(".")[0] == "torch":
            raise Untranslatable(f"it calls {name} ({value.__module__}), which is torch's own")
        return value
