"""The planner: turns one gradient check into a :class:`Plan` of independent units and the
stages that judge them, in the reference's order.

Reference order (torch.autograd.gradcheck, backward mode):
  1. for a function with complex outputs, the imaginary parts, then the real parts;
     otherwise the function itself: numerical Jacobians of every input, then per output the
     analytical Jacobian (reentrancy, sizes, dtypes) and its comparison with every input's;
     a function with no differentiable output must have a zero numerical Jacobian;
  2. zero grad-outputs must give zero grads;
  3. with check_undefined_grad, backward must accept undefined grad-outputs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from distcheck.engines import Engine, TensorInfo
from distcheck.options import CheckOptions
from distcheck.plan.chunking import ChunkPolicy, Whole, Workload
from distcheck.plan.stages import (
    Auxiliary,
    JacobianComparison,
    OutputInfo,
    Stage,
    ZeroNumericalJacobian,
)
from distcheck.plan.subject import Subject, Variant
from distcheck.plan.units import (
    AnalyticalRows,
    AuxiliaryCheck,
    InputSlot,
    NumericalColumns,
    OutputSlot,
    Unit,
)


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


def _real_info(info: TensorInfo) -> TensorInfo:
    """The real or imaginary part of a (complex) output."""
    if not info.is_complex:
        return info
    real = np.empty(0, dtype=info.dtype).real.dtype
    return TensorInfo(info.shape, real, str(real), False, True, info.requires_grad, info.is_double)


class _Builder:
    def __init__(self, options: CheckOptions, policy: ChunkPolicy, costs: Callable[[], Costs] | None):
        self.options, self.policy = options, policy
        self._costs, self._measured = costs, None
        self.units: list[Unit] = []
        self.stages: list[Stage] = []

    def costs(self) -> Costs | None:
        if self.policy.needs_costs and self._costs is not None and self._measured is None:
            self._measured = self._costs()
        return self._measured

    def add(self, unit: Unit) -> int:
        self.units.append(unit)
        return len(self.units) - 1

    def chunks(self, items: int, seconds_per_item: float | None) -> list[tuple[int, int]]:
        return self.policy.chunks(Workload(items, seconds_per_item)) or [(0, items)]

    def numerical(
        self,
        variant: str,
        inputs: Sequence[InputSlot],
        infos: Sequence[TensorInfo],
        outputs: Sequence[TensorInfo],
        wanted: Sequence[bool],
    ) -> tuple[tuple[int, ...], ...]:
        """Column units for every differentiable input; blocks for the ``wanted`` outputs."""
        costs = self.costs()
        per_input = []
        for slot in inputs:
            info = infos[slot.position]
            slots = tuple(
                OutputSlot(o.numel, str(info.dtype if info.is_complex else o.dtype)) if want else None
                for o, want in zip(outputs, wanted)
            )
            evaluations = 4 if info.is_complex else 2
            per_item = None if costs is None else evaluations * costs.evaluation
            per_input.append(
                tuple(
                    self.add(
                        NumericalColumns(
                            variant, slot.position, start, stop, self.options.eps, slot.shape, info.is_complex, slots
                        )
                    )
                    for start, stop in self.chunks(slot.numel, per_item)
                )
            )
        return tuple(per_input)

    def analytical(self, variant: str, inputs: tuple[InputSlot, ...], output: OutputInfo) -> tuple[int, ...]:
        costs = self.costs()
        per_item = None if costs is None else 2 * costs.backward
        numel = int(np.prod(output.shape, dtype=np.int64))
        return tuple(
            self.add(AnalyticalRows(variant, output.position, start, stop, inputs))
            for start, stop in self.chunks(numel, per_item)
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
    """The plan of a backward-mode check of ``func`` at ``inputs``.

    ``input_infos``/``output_infos`` describe the inputs and the outputs of ``func(*inputs)``
    (None for values that are not tensors).
    """
    builder = _Builder(options, policy or Whole(), costs)
    diff_inputs = tuple(
        InputSlot(p, info.shape, str(info.dtype))
        for p, info in enumerate(input_infos)
        if info is not None and info.requires_grad
    )
    variants = {"f": Variant(func, inputs)}
    if options.check_backward_ad:
        complex_outputs = any(o is not None and o.is_complex for o in output_infos)
        parts = ("imag", "real") if complex_outputs else (None,)
        for part in parts:
            key = part or "f"
            if part is not None:
                variants[key] = Variant(engine.output_part(func, part, len(inputs)), inputs)
            infos = [None if o is None else _real_info(o) if part else o for o in output_infos]
            _plan_variant(builder, key, part, diff_inputs, input_infos, infos, output_infos)
        builder.stages.append(Auxiliary(builder.add(AuxiliaryCheck("f", "zero_grad_output", bool(options.masked)))))
        if options.check_undefined_grad:
            builder.stages.append(Auxiliary(builder.add(AuxiliaryCheck("f", "undefined_grad"))))
    return Plan(Subject(engine.name, variants), builder.units, builder.stages)


def _plan_variant(
    builder: _Builder,
    key: str,
    part: str | None,
    diff_inputs: tuple[InputSlot, ...],
    input_infos: Sequence[TensorInfo | None],
    outputs: Sequence[TensorInfo | None],
    original_outputs: Sequence[TensorInfo | None],
) -> None:
    differentiable = [o is not None and o.requires_grad for o in outputs]
    float_outputs = [o is not None and o.is_float_or_complex for o in outputs]
    placeholder = TensorInfo((), np.dtype(np.float64), "", False, False, False)
    outputs_or_placeholder = [o or placeholder for o in outputs]
    if not any(differentiable):
        numerical = builder.numerical(key, diff_inputs, input_infos, outputs_or_placeholder, float_outputs)
        builder.stages.append(ZeroNumericalJacobian(key, numerical))
        return
    numerical = builder.numerical(key, diff_inputs, input_infos, outputs_or_placeholder, differentiable)
    infos = tuple(
        OutputInfo(p, o.shape, bool(part) and original_outputs[p].is_complex)
        for p, o in enumerate(outputs)
        if differentiable[p]
    )
    analytical = tuple(builder.analytical(key, diff_inputs, o) for o in infos)
    builder.stages.append(JacobianComparison(key, diff_inputs, infos, numerical, analytical, part))
