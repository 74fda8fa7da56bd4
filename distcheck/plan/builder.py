"""The planner's builder: a check's variants, stored arrays, units and stages as they are
made, and the units of each kind of work (numerical columns, analytical rows, forward columns,
projections) cut into chunks by the executor's policy."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from distcheck.engines import Engine, TensorInfo
from distcheck.kinds import FUNCTION, AuxCheck, VariantKey
from distcheck.options import CheckOptions
from distcheck.plan.chunking import ChunkPolicy, Workload
from distcheck.plan.stages import Auxiliary, OutputInfo, Stage
from distcheck.plan.subject import Variant
from distcheck.plan.units import (
    AnalyticalRows,
    AuxiliaryCheck,
    ForwardColumns,
    InputSlot,
    NumericalColumns,
    NumericalProjection,
    OutputSlot,
    Unit,
)
from distcheck.plan.units.slots import slots_bytes


@dataclass(frozen=True)
class Costs:
    """Measured on the driver: one function evaluation and one backward pass, in seconds."""

    evaluation: float
    backward: float


# numpy's str(dtype) is Python code, and every slot names its dtype: once per dtype
dtype_name = functools.cache(str)


def real_info(info: TensorInfo | None) -> TensorInfo | None:
    """The real (or imaginary) part of a complex tensor; real tensors unchanged."""
    if info is None or not info.is_complex:
        return info
    real = _real_dtype(info.dtype)
    return TensorInfo(info.shape, real, dtype_name(real), False, True, info.requires_grad, info.is_double)


@functools.cache
def _real_dtype(dtype: np.dtype) -> np.dtype:
    return np.empty(0, dtype=dtype).real.dtype


def _numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


class Builder:
    def __init__(
        self,
        engine: Engine,
        options: CheckOptions,
        policy: ChunkPolicy,
        costs: Callable[[], Costs] | None,
    ):
        self.engine, self.options, self.policy = engine, options, policy
        self._costs, self._measured = costs, None
        self.variants: dict[str, Variant] = {}
        self.data: dict[str, np.ndarray] = {}
        self.units: list[Unit] = []
        self.stages: list[Stage] = []
        self.rng_marks: list = []
        self.draw_stages: list[int] = []

    # -- bookkeeping ---------------------------------------------------------------------

    def add(self, unit: Unit) -> int:
        self.units.append(unit)
        return len(self.units) - 1

    def store(self, key: str, array: np.ndarray) -> str:
        self.data[key] = array
        return key

    def per_item(self, evaluations: float, of: str) -> float | None:
        if not self.policy.needs_costs or self._costs is None:
            return None
        if self._measured is None:
            self._measured = self._costs()
        return evaluations * getattr(self._measured, of)

    def chunks(self, items: int, seconds_per_item: float | None, bytes_per_item: int = 0) -> list[tuple[int, int]]:
        return self.policy.chunks(Workload(items, seconds_per_item, bytes_per_item)) or [(0, items)]

    def auxiliary(self, check: AuxCheck, variant: VariantKey = FUNCTION, **fields) -> None:
        self.stages.append(Auxiliary(self.add(AuxiliaryCheck(variant, check, **fields))))

    def draw_normal(self, name: str, info: TensorInfo) -> tuple[str, ...]:
        """Two standard normal arrays like ``info`` from the engine's global RNG, stored under
        ``name``, for the next stage (a batched check); the RNG state before and after is kept
        (:meth:`Plan.rewind_rng`)."""
        if not self.rng_marks:
            self.rng_marks.append(self.engine.rng_state())
        draws = self.engine.random_normal([info.shape, info.shape], [info.dtype, info.dtype])
        self.rng_marks.append(self.engine.rng_state())
        self.draw_stages.append(len(self.stages))
        return tuple(self.store(f"{name}/{n}", d) for n, d in enumerate(draws))

    # -- units ---------------------------------------------------------------------------

    def output_slots(self, outputs: Sequence[TensorInfo | None], wanted: Sequence[bool], input_info: TensorInfo):
        return tuple(
            OutputSlot(o.numel, dtype_name(input_info.dtype if input_info.is_complex else o.dtype)) if want else None
            for o, want in zip(outputs, wanted)
        )

    def numerical_columns(
        self,
        variant: VariantKey,
        slot: InputSlot,
        info: TensorInfo,
        outputs: Sequence[TensorInfo | None],
        wanted: Sequence[bool],
        whole: bool = False,
    ) -> list[NumericalColumns]:
        variant, info = self.numerical_variant(variant, slot.position, info)
        slots = self.output_slots(outputs, wanted, info)
        per_item = None if whole else self.per_item(4 if info.is_complex else 2, "evaluation")
        items = info.perturbable
        ranges = [(0, items)] if whole else self.chunks(items, per_item, slots_bytes(slots))
        sparse = info.elements is not None
        return [
            NumericalColumns(
                variant, slot.position, start, stop, self.options.eps, slot.shape, info.is_complex, slots, sparse
            )
            for start, stop in ranges
        ]

    def numerical_variant(self, key: VariantKey, position: int, info: TensorInfo) -> tuple[VariantKey, TensorInfo]:
        """Where finite differences of ``key`` run: unless ``masked``, on a twin variant whose
        sparse inputs have every element specified (torch perturbs unspecified elements too)."""
        if self.options.masked:
            return key, info
        twin = key.densified()
        if twin not in self.variants:
            variant = self.variants[key]
            densified = self.engine.densify(variant.inputs)
            if densified is None:
                return key, info
            self.variants[twin] = Variant(variant.func, densified)
        value = self.variants[twin].inputs[position]
        dense = self.engine.info(value)
        return twin, TensorInfo(
            info.shape,
            info.dtype,
            info.dtype_name,
            info.is_complex,
            info.is_floating,
            info.requires_grad,
            info.is_double,
            info.overlapping,
            dense.elements,
        )

    def analytical_rows(
        self, variant: VariantKey, inputs: tuple[InputSlot, ...], output: OutputInfo, whole: bool = False
    ) -> list[AnalyticalRows]:
        numel = _numel(output.shape)
        held = slots_bytes(inputs)  # one run of the rows (the second is compared, not held)
        ranges = [(0, numel)] if whole else self.chunks(numel, self.per_item(2, "backward"), held)
        return [AnalyticalRows(variant, output.position, start, stop, inputs) for start, stop in ranges]

    def forward_columns(
        self,
        variant: VariantKey,
        index: int,
        inputs: tuple[InputSlot, ...],
        outputs: Sequence[TensorInfo | None],
        whole: bool = False,
        vector: str | None = None,
    ) -> list[ForwardColumns]:
        slots = tuple(
            OutputSlot(o.numel, dtype_name(o.dtype)) if o is not None and o.is_float_or_complex else None
            for o in outputs
        )
        complex_outputs = tuple(o is not None and o.is_complex for o in outputs)
        positions = tuple(s.position for s in inputs)
        numel = inputs[index].numel
        if vector is not None:
            ranges = [(0, 1)]
        else:
            ranges = [(0, numel)] if whole else self.chunks(numel, self.per_item(2, "evaluation"), slots_bytes(slots))
        return [
            ForwardColumns(variant, index, positions, start, stop, slots, complex_outputs, vector)
            for start, stop in ranges
        ]

    def add_all(self, units: Sequence[Unit]) -> tuple[int, ...]:
        return tuple(self.add(u) for u in units)

    def projections(self, variant: VariantKey, diff, infos, u, wanted: Sequence[bool]) -> tuple[int, ...]:
        """Fast mode's finite differences of ``variant``: one projection unit per input, along its ``u``."""
        return tuple(
            self.add(
                NumericalProjection(
                    self.numerical_variant(variant, s.position, i)[0], s.position, keys, self.options.eps, tuple(wanted)
                )
            )
            for s, i, keys in zip(diff, infos, u)
        )

    def columns(self, variant: VariantKey, diff, infos, outputs, wanted: Sequence[bool]) -> tuple[tuple[int, ...], ...]:
        """Slow mode's finite differences of ``variant``: the column units of each input."""
        return tuple(self.add_all(self.numerical_columns(variant, s, i, outputs, wanted)) for s, i in zip(diff, infos))

    # -- random vectors (fast mode) ------------------------------------------------------

    def unit_vectors(
        self,
        prefix: str,
        inputs: Sequence[TensorInfo],
        outputs: Sequence[TensorInfo],
        slots: Sequence[InputSlot] = (),
    ) -> tuple[tuple[tuple[str, ...], ...], tuple[str, ...]]:
        """u per input (two real vectors for a complex input: real and imaginary directions),
        then v per output, drawn in torch's order; returns their subject.data keys. A sparse
        input's u has random values at its specified elements only (stored dense)."""
        numels, dtypes, names, u = [], [], [], []
        for i, info in enumerate(inputs):
            keys = tuple(f"{prefix}/u{i}{part}" for part in (("r", "i") if info.is_complex else ("r",)))
            u.append(keys)
            names += keys
            numels += [info.perturbable] * len(keys)
            dtypes += [real_info(info).dtype] * len(keys)
        v = tuple(f"{prefix}/v{k}" for k in range(len(outputs)))
        names += v
        numels += [o.numel for o in outputs]
        dtypes += [o.dtype for o in outputs]
        vectors = dict(zip(names, self.engine.random_unit_vectors(numels, dtypes)))
        for i, (info, keys) in enumerate(zip(inputs, u)):
            if info.elements is None:
                continue
            rows = self.engine.element_rows(self.variants[FUNCTION].inputs[slots[i].position])
            for key in keys:
                dense = np.zeros(info.numel, dtype=vectors[key].dtype)
                dense[rows] = vectors[key]
                vectors[key] = dense
        for name, vector in vectors.items():
            self.store(name, vector)
        return tuple(u), v
