"""Complex functions as real ones: the real or imaginary part of complex outputs (torch checks
a complex output as two real functions), and a function of the real or imaginary part of its
complex inputs (forward-mode checks of complex inputs), on the engine's ``complex_part`` /
``complex_join`` primitives. Both are picklable: they travel to workers inside a check's subject.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

import numpy as np

from distcheck.engines.batched import function_key, vectorizable
from distcheck.engines.registry import engine_of, get_engine
from distcheck.engines.tuples import as_tuple
from distcheck.kinds import Part

if TYPE_CHECKING:
    from distcheck.engines.base import Engine


class ComplexOutputPart:
    """``func`` with the ``part`` ("real"/"imag") taken of its complex outputs (torch's gradient
    convention: a grad-output g of the imaginary part reaches the output as 1j·g)."""

    def __init__(self, func: Callable, part: Part, engine: str | None = None):
        self.func, self.part, self.engine = func, part, engine

    def __call__(self, *inputs):
        outputs = as_tuple(self.func(*inputs))
        if self.engine is None:  # built without an engine: the outputs' engine
            self.engine = next((name for name in map(engine_of, outputs) if name is not None), None)
            if self.engine is None:
                return outputs
        engine = get_engine(self.engine)
        return tuple(engine.complex_part(o, self.part) for o in outputs)

    @property
    def batch_key(self) -> Hashable | None:
        return _key("part", self.part, self.func)

    def vectorizable(self, inputs: tuple) -> ComplexOutputPart:
        return ComplexOutputPart(vectorizable(self.func, inputs), self.part, self.engine)


class ComplexOutputParts:
    """``func`` with each of its outputs replaced by its ``parts`` (``"imag"``, ``"real"``), part
    after part: ``len(parts) × n`` outputs from one evaluation, each exactly the value
    :class:`ComplexOutputPart` gives for its part (the same ``complex_part`` of the same output)."""

    def __init__(self, func: Callable, parts: tuple[Part, ...], engine: str):
        self.func, self.parts, self.engine = func, parts, engine

    def __call__(self, *inputs):
        outputs = as_tuple(self.func(*inputs))
        engine = get_engine(self.engine)
        return tuple(engine.complex_part(o, part) for part in self.parts for o in outputs)

    @property
    def batch_key(self) -> Hashable | None:
        return _key("parts", self.parts, self.func)

    def vectorizable(self, inputs: tuple) -> ComplexOutputParts:
        return ComplexOutputParts(vectorizable(self.func, inputs), self.parts, self.engine)


class ComplexInputPart:
    """``func`` as a function of the ``part`` of its complex inputs at ``positions``, the other
    part held at the constant ``others``."""

    def __init__(self, engine: str, func: Callable, positions: tuple[int, ...], others: tuple, part: Part):
        self.engine, self.func, self.positions, self.others, self.part = engine, func, positions, others, part

    def __call__(self, *inputs):
        engine = get_engine(self.engine)
        full = list(inputs)
        for i, other in zip(self.positions, self.others):
            full[i] = engine.complex_join(inputs[i], other, self.part)
        return as_tuple(self.func(*full))

    @property
    def batch_key(self) -> Hashable | None:
        return _key("input part", (self.part, self.positions), self.func)

    def vectorizable(self, inputs: tuple) -> ComplexInputPart:
        engine = get_engine(self.engine)
        full = list(inputs)
        for i, other in zip(self.positions, self.others):
            full[i] = engine.complex_join(inputs[i], other, self.part)
        inner = vectorizable(self.func, tuple(full))
        return ComplexInputPart(self.engine, inner, self.positions, self.others, self.part)


def _key(kind: str, which: Hashable, func: Callable) -> Hashable | None:
    inner = function_key(func)
    return None if inner is None else (kind, which, inner)


def output_part(engine: Engine, func: Callable, part: Part, n_inputs: int) -> Callable:
    """``func`` with its complex outputs replaced by their ``part``: the engine's own
    construction (:meth:`Engine.output_part`), else :class:`ComplexOutputPart`."""
    own = engine.output_part(func, part, n_inputs)
    return ComplexOutputPart(func, part, engine.name) if own is None else own


def output_parts(engine: Engine, func: Callable, parts: tuple[Part, ...]) -> Callable:
    """``func`` with each output replaced by its ``parts``: the engine's own construction
    (:meth:`Engine.output_parts`), else :class:`ComplexOutputParts`."""
    own = engine.output_parts(func, parts)
    return ComplexOutputParts(func, parts, engine.name) if own is None else own


def input_part(engine: Engine, func: Callable, inputs: tuple, part: Part) -> tuple[Callable, tuple]:
    """``func`` of the ``part`` of its complex inputs, and those parts as new inputs: the
    engine's own construction (:meth:`Engine.input_part`), else :func:`split_inputs`."""
    own = engine.input_part(func, inputs, part)
    return split_inputs(engine, func, inputs, part) if own is None else own


def split_inputs(engine: Engine, func: Callable, inputs: tuple, part: Part) -> tuple[Callable, tuple]:
    """``func`` of the ``part`` of its complex inputs, and those parts as new inputs (differentiable
    where the complex inputs were), on :meth:`Engine.complex_part` / :meth:`Engine.complex_join`."""
    positions = tuple(i for i, x in enumerate(inputs) if engine.is_tensor(x) and engine.info(x, func, i).is_complex)
    parts, others = list(inputs), []
    other_part = Part(part).other
    for i in positions:
        x = inputs[i]
        values, real = engine.to_numpy(x), engine.complex_part(x, part)  # ``real``: a real array, for its dtype
        # np.array(order="C"), not np.ascontiguousarray: that makes a 0-dim part 1-dim
        taken = engine.from_numpy(np.array(getattr(values, part), order="C"), like=real)
        parts[i] = engine.track(taken) if engine.info(x, func, i).requires_grad else taken
        others.append(engine.from_numpy(np.array(getattr(values, other_part), order="C"), like=real))
    return ComplexInputPart(engine.name, func, positions, tuple(others), part), tuple(parts)
