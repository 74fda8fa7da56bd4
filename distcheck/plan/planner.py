"""The planner: turns one gradient check into a :class:`Plan` of independent units and the
stages that judge them, in the reference's order (torch.autograd.gradcheck):

1. backward mode: for a function with complex outputs the imaginary parts, then the real
   parts, else the function itself — slow mode compares full Jacobians, fast mode projections;
2. forward mode (``check_forward_ad``): likewise, splitting complex *inputs* into imaginary
   and real parts; then the undefined-tangent checks;
3. batched forward gradients (``check_batched_forward_grad``), per input;
4. batched gradients (``check_batched_grad``), per output;
5. zero grad-outputs give zero grads; 6. undefined grad-outputs are accepted.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from distcheck.engines import Engine, TensorInfo, complex_parts
from distcheck.kinds import FUNCTION, OUTPUT_PARTS, PARTS_IN_TORCH_ORDER, AuxCheck, Mode, Part, VariantKey
from distcheck.options import CheckOptions
from distcheck.plan.chunking import ChunkPolicy, Whole, Workload
from distcheck.plan.stages import (
    Auxiliary,
    JacobianComparison,
    OutputInfo,
    ProjectedComparison,
    Stage,
    ZeroNumericalJacobian,
)
from distcheck.plan.subject import Subject, Variant
from distcheck.plan.units import (
    ROW_RUNS,
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


@dataclass
class Plan:
    subject: Subject
    units: list[Unit]
    stages: list[Stage]
    # The engine's global RNG as the reference leaves it when a check stops early: the batched
    # checks' random vectors are drawn here, at planning, where the reference draws them when it
    # reaches each check. rng_marks[k]: the state after the first k groups of draws;
    # draw_stages[k]: the stage of group k.
    rng_marks: tuple = ()
    draw_stages: tuple[int, ...] = ()

    def rewind_rng(self, engine: Engine, failed_stage: int) -> None:
        """The global RNG as the reference leaves it when ``failed_stage`` raises: only the
        draws of the batched checks it reached (that stage's included) are made."""
        reached = sum(stage <= failed_stage for stage in self.draw_stages)
        if reached < len(self.draw_stages):
            engine.set_rng_state(self.rng_marks[reached])


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


class _Builder:
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
        held = ROW_RUNS * slots_bytes(inputs)
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


def _diff_slots(input_infos: Sequence[TensorInfo | None]) -> tuple[InputSlot, ...]:
    return tuple(
        InputSlot(p, info.shape, dtype_name(info.dtype))
        for p, info in enumerate(input_infos)
        if info is not None and info.requires_grad
    )


def plan_gradcheck(
    engine: Engine,
    func: Callable,
    inputs: tuple,
    input_infos: Sequence[TensorInfo | None],
    output_infos: Sequence[TensorInfo | None],
    options: CheckOptions,
    policy: ChunkPolicy | None = None,
    costs: Callable[[], Costs] | None = None,
) -> Plan:
    """The plan of a check of ``func`` at ``inputs``.

    ``input_infos``/``output_infos`` describe the inputs and the outputs of ``func(*inputs)``
    (None for values that are not tensors).
    """
    b = _Builder(engine, options, policy or Whole(), costs)
    b.per_item(1, "evaluation")  # measure the costs now if the policy uses them
    b.variants[FUNCTION] = Variant(func, inputs)
    diff = _diff_slots(input_infos)

    if options.check_backward_ad:
        complex_outputs = any(o is not None and o.is_complex for o in output_infos)
        shared = None
        if complex_outputs:
            b.variants[OUTPUT_PARTS] = Variant(complex_parts.output_parts(engine, func, PARTS_IN_TORCH_ORDER), inputs)
            shared = _SharedParts(len(output_infos))
        for part in PARTS_IN_TORCH_ORDER if complex_outputs else (None,):
            key = VariantKey.of(part)
            if part:
                b.variants[key] = Variant(complex_parts.output_part(engine, func, part, len(inputs)), inputs)
            outputs = [real_info(o) if part else o for o in output_infos]
            _plan_backward(b, _Target(key, part, diff), input_infos, outputs, output_infos, shared)

    if options.check_forward_ad:
        complex_inputs = any(i is not None and i.is_complex and i.requires_grad for i in input_infos)
        variants = []
        for part in PARTS_IN_TORCH_ORDER if complex_inputs else (None,):
            key = VariantKey.of(part, inputs=True)
            infos = list(input_infos)
            if part:
                b.variants[key] = Variant(*complex_parts.input_part(engine, func, inputs, part))
                infos = [real_info(i) for i in input_infos]
            was_complex = tuple(input_infos[s.position].is_complex for s in diff)
            _plan_forward(b, _Target(key, part, _diff_slots(infos)), infos, output_infos, was_complex)
            variants.append((key, infos))
        if options.check_undefined_grad:
            for key, infos in variants:
                slots = _diff_slots(infos)
                u, _ = b.unit_vectors(f"{key}/undefined", [infos[s.position] for s in slots], [], slots)
                b.auxiliary(AuxCheck.UNDEFINED_FORWARD_GRAD, key, vectors=tuple(keys[0] for keys in u))

    if options.check_batched_forward_grad:
        for slot in diff:
            keys = b.draw_normal(f"batched-forward/{slot.position}", input_infos[slot.position])
            b.auxiliary(AuxCheck.BATCHED_FORWARD_GRAD, index=slot.position, vectors=keys)

    if options.check_backward_ad:
        if options.check_batched_grad:
            for position, info in enumerate(output_infos):
                if info is None or not info.requires_grad:
                    continue
                keys = b.draw_normal(f"batched/{position}", info)
                b.auxiliary(AuxCheck.BATCHED_GRAD, index=position, vectors=keys)
        b.auxiliary(AuxCheck.ZERO_GRAD_OUTPUT, masked=bool(options.masked))
        if options.check_undefined_grad:
            b.auxiliary(AuxCheck.UNDEFINED_GRAD)
    subject = Subject(engine.name, b.variants, b.data, b._measured)
    return Plan(subject, b.units, b.stages, tuple(b.rng_marks), tuple(b.draw_stages))


@dataclass(frozen=True)
class _Target:
    """What a Jacobian stage checks: a variant, the part of complex values it stands for, and
    its differentiable inputs."""

    key: VariantKey
    part: Part | None
    diff: tuple[InputSlot, ...]


@dataclass
class _SharedParts:
    """The finite differences of a function with complex outputs, made once for the checks of
    both parts (torch evaluates the function again for each): units of the
    :data:`~distcheck.kinds.OUTPUT_PARTS` variant, planned with the first part's stage and
    reused by the second's. Both parts perturb the inputs at the same points: the same columns,
    or in fast mode the same random directions u (drawn alike for both; compared to be sure)."""

    n_outputs: int
    units: dict[tuple, tuple[int, ...]] = field(default_factory=dict)  # (kind, wanted) -> per input
    vectors: dict[tuple, list[np.ndarray]] = field(default_factory=dict)

    def window(self, part: Part) -> tuple[int, int]:
        start = PARTS_IN_TORCH_ORDER.index(part) * self.n_outputs
        return start, start + self.n_outputs

    def projections(self, b: _Builder, diff, infos, u, wanted: Sequence[bool]) -> tuple[int, ...] | None:
        """The shared projection units along ``u`` (one per input), or None if ``u`` differs from
        the directions they were made for."""
        vectors = [b.data[key] for keys in u for key in keys]
        key = ("projection", tuple(wanted))
        if key in self.units:
            made = self.vectors[key]
            same = len(made) == len(vectors) and all(np.array_equal(a, c) for a, c in zip(made, vectors))
            return self.units[key] if same else None
        self.vectors[key] = vectors
        self.units[key] = b.projections(OUTPUT_PARTS, diff, infos, u, list(wanted) * 2)
        return self.units[key]

    def columns(self, b: _Builder, diff, infos, outputs, wanted: Sequence[bool]) -> tuple[tuple[int, ...], ...]:
        key = ("columns", tuple(wanted))
        if key not in self.units:
            self.units[key] = b.columns(OUTPUT_PARTS, diff, infos, list(outputs) * 2, list(wanted) * 2)
        return self.units[key]


def _plan_backward(
    b: _Builder,
    target: _Target,
    input_infos: Sequence[TensorInfo | None],
    outputs: Sequence[TensorInfo | None],
    original_outputs: Sequence[TensorInfo | None],
    shared: _SharedParts | None = None,
) -> None:
    key, part, diff = target.key, target.part, target.diff
    differentiable = [o is not None and o.requires_grad for o in outputs]
    floats = [o is not None and o.is_float_or_complex for o in outputs]
    checked = tuple(
        OutputInfo(p, o.shape, bool(part) and original_outputs[p].is_complex)
        for p, o in enumerate(outputs)
        if differentiable[p]
    )
    infos = [input_infos[s.position] for s in diff]
    window = None
    if b.options.fast_mode:
        u, v = b.unit_vectors(key, infos, [outputs[o.position] for o in checked], diff)
        wanted = differentiable if checked else floats
        numerical = shared.projections(b, diff, infos, u, wanted) if shared and checked else None
        if numerical is None:
            numerical = b.projections(key, diff, infos, u, wanted)
        else:
            window = shared.window(part)
        if not checked:
            numels = tuple(s.numel for s in diff)
            b.stages.append(ZeroNumericalJacobian(key, tuple((n,) for n in numerical), numels, b.options.nondet_tol))
            return
        analytical = tuple(b.add(AnalyticalRows(key, o.position, 0, 1, diff, vector=vk)) for o, vk in zip(checked, v))

        def explain(i: int, k: int) -> tuple[Unit, Unit]:
            return (
                b.numerical_columns(key, diff[i], infos[i], outputs, differentiable, whole=True)[0],
                b.analytical_rows(key, diff, checked[k], whole=True)[0],
            )

        stage = ProjectedComparison(
            key, Mode.BACKWARD, diff, checked, numerical, analytical, u, v, explain, part, numerical_outputs=window
        )
        b.stages.append(stage)
        return
    if not checked:
        numerical = b.columns(key, diff, infos, outputs, floats)
        b.stages.append(ZeroNumericalJacobian(key, numerical, tuple(s.numel for s in diff)))
        return
    if shared:
        numerical, window = shared.columns(b, diff, infos, outputs, differentiable), shared.window(part)
    else:
        numerical = b.columns(key, diff, infos, outputs, differentiable)
    analytical = tuple(b.add_all(b.analytical_rows(key, diff, o)) for o in checked)
    b.stages.append(
        JacobianComparison(key, Mode.BACKWARD, diff, checked, numerical, analytical, part, numerical_outputs=window)
    )


def _plan_forward(
    b: _Builder,
    target: _Target,
    input_infos: Sequence[TensorInfo | None],
    outputs: Sequence[TensorInfo | None],
    was_complex: tuple[bool, ...],
) -> None:
    key, part, diff = target.key, target.part, target.diff
    differentiable = [o is not None and o.requires_grad for o in outputs]
    floats = [o is not None and o.is_float_or_complex for o in outputs]
    infos = [input_infos[s.position] for s in diff]
    if b.options.fast_mode:
        # torch's fast forward mode compares every float output (no tangent counts as zero)
        checked = tuple(OutputInfo(p, o.shape, False) for p, o in enumerate(outputs) if floats[p])
        u, _ = b.unit_vectors(key, infos, [], diff)
        numerical = b.projections(key, diff, infos, u, floats)
        analytical = tuple(
            b.add_all(b.forward_columns(key, i, diff, outputs, vector=keys[0]))[0] for i, keys in enumerate(u)
        )

        def explain(i: int, k: int) -> tuple[Unit, Unit]:
            return (
                b.numerical_columns(key, diff[i], infos[i], outputs, floats, whole=True)[0],
                b.forward_columns(key, i, diff, outputs, whole=True)[0],
            )

        stage = ProjectedComparison(key, Mode.FORWARD, diff, checked, numerical, analytical, u, (), explain, part)
        b.stages.append(replace(stage, input_was_complex=was_complex))
        return
    if not any(differentiable):
        numerical = b.columns(key, diff, infos, outputs, floats)
        b.stages.append(ZeroNumericalJacobian(key, numerical, tuple(s.numel for s in diff)))
        return
    checked = tuple(OutputInfo(p, o.shape, False) for p, o in enumerate(outputs) if differentiable[p])
    numerical = b.columns(key, diff, infos, outputs, differentiable)
    analytical = tuple(b.add_all(b.forward_columns(key, i, diff, outputs)) for i in range(len(diff)))
    b.stages.append(JacobianComparison(key, Mode.FORWARD, diff, checked, numerical, analytical, part, was_complex))
