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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from distcheck.engines import Engine, TensorInfo, complex_parts
from distcheck.kinds import FUNCTION, OUTPUT_PARTS, PARTS_IN_TORCH_ORDER, AuxCheck, Fallback, Mode, Part, VariantKey
from distcheck.options import CheckOptions
from distcheck.plan.builder import Builder, Costs, dtype_name, real_info
from distcheck.plan.chunking import ChunkPolicy, Whole
from distcheck.plan.stages import JacobianComparison, OutputInfo, ProjectedComparison, Stage, ZeroNumericalJacobian
from distcheck.plan.subject import Subject, Variant
from distcheck.plan.units import AnalyticalRows, InputSlot, Unit
from distcheck.plan.vectorize import vectorized


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
    # why each slow-mode Jacobian comparison left element by element is (by stage index), when
    # the check batches its work (options.vectorize); see plan/vectorize.py
    fallbacks: dict[int, Fallback] = field(default_factory=dict)

    def rewind_rng(self, engine: Engine, failed_stage: int) -> None:
        """The global RNG as the reference leaves it when ``failed_stage`` raises: only the
        draws of the batched checks it reached (that stage's included) are made."""
        reached = sum(stage <= failed_stage for stage in self.draw_stages)
        if reached < len(self.draw_stages):
            engine.set_rng_state(self.rng_marks[reached])


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
    call_seconds: float | None = None,
) -> Plan:
    """The plan of a check of ``func`` at ``inputs``.

    ``input_infos``/``output_infos`` describe the inputs and the outputs of ``func(*inputs)``
    (None for values that are not tensors); ``call_seconds``, if known, is what one call took
    (batching skips work estimated too small from it).
    """
    b = Builder(engine, options, policy or Whole(), costs)
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
    units, stages, fallbacks = b.units, b.stages, {}
    if options.vectorize is not None and not options.fast_mode:
        batching = (b.policy, options.vectorize, call_seconds)
        units, stages, fallbacks = vectorized(units, stages, subject, engine, options, *batching)
    return Plan(subject, units, stages, tuple(b.rng_marks), tuple(b.draw_stages), fallbacks)


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

    def projections(self, b: Builder, diff, infos, u, wanted: Sequence[bool]) -> tuple[int, ...] | None:
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

    def columns(self, b: Builder, diff, infos, outputs, wanted: Sequence[bool]) -> tuple[tuple[int, ...], ...]:
        key = ("columns", tuple(wanted))
        if key not in self.units:
            self.units[key] = b.columns(OUTPUT_PARTS, diff, infos, list(outputs) * 2, list(wanted) * 2)
        return self.units[key]


def _plan_backward(
    b: Builder,
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
            b.stages.append(ZeroNumericalJacobian(key, tuple((n,) for n in numerical), diff, b.options.nondet_tol))
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
        b.stages.append(ZeroNumericalJacobian(key, numerical, diff))
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
    b: Builder,
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
        b.stages.append(ZeroNumericalJacobian(key, numerical, diff))
        return
    checked = tuple(OutputInfo(p, o.shape, False) for p, o in enumerate(outputs) if differentiable[p])
    numerical = b.columns(key, diff, infos, outputs, differentiable)
    analytical = tuple(b.add_all(b.forward_columns(key, i, diff, outputs)) for i in range(len(diff)))
    b.stages.append(JacobianComparison(key, Mode.FORWARD, diff, checked, numerical, analytical, part, was_complex))
