"""The reducer: assembles unit results into Jacobians and judges them, stage by stage, in the
reference's order, raising the first failure (a GradcheckError or the exception a unit raised).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from distcheck.engines import Engine
from distcheck.executors.base import Results
from distcheck.executors.serial import SerialExecutor
from distcheck.kinds import Fallback, Mode
from distcheck.numerics.compare import adjusted_atol, allclose, max_abs_difference
from distcheck.options import CheckOptions
from distcheck.plan.planner import Plan
from distcheck.plan.stages import (
    Auxiliary,
    BatchedComparison,
    JacobianComparison,
    ProjectedComparison,
    Stage,
    ZeroNumericalJacobian,
)
from distcheck.plan.units import Unit
from distcheck.plan.units.batches import BatchRefused
from distcheck.plan.vectorize import CLEAR
from distcheck.reduce import blockwise, jacobians, messages, tiles
from distcheck.reduce.counts import BatchCounts
from distcheck.reduce.failure_blocks import FailureBlocks, attach

RunMore = Callable[[Sequence[Unit]], Results]  # runs follow-up units (fast-mode failure explanations)


class Reducer:
    def __init__(
        self,
        plan: Plan,
        results: Results,
        options: CheckOptions,
        engine: Engine,
        run_more: RunMore | None = None,
        counts: BatchCounts | None = None,
    ):
        self.plan, self.results, self.options, self.engine = plan, results, options, engine
        self.run_more = run_more
        self.counts = BatchCounts() if counts is None else counts
        self.fail: Callable[[str], Exception] = engine.error_class

    def run(self) -> None:
        for index, stage in enumerate(self.plan.stages):
            if index in self.plan.fallbacks:
                self.counts.fell_back(self.plan.fallbacks[index])
            try:
                self.judge(stage)
            except Exception:
                self.plan.rewind_rng(self.engine, index)
                raise

    def judge(self, stage: Stage) -> None:
        """Judge one stage; raises its failure."""
        getattr(self, _HANDLERS[type(stage)])(stage)

    def value(self, unit: int):
        return self.results.get(unit).unwrap()

    # -- shared checks -------------------------------------------------------------------

    def check_attributes(self, rows) -> None:
        """Size, dtype and reentrancy of an output's analytical Jacobians (backward mode)."""
        o = self.options
        # Sizes are always checked, dtypes with check_grad_dtypes. (torch 2.13 swaps the two
        # flags internally; its autograd engine coerces gradients so neither can differ there.)
        if rows.wrong_dtype and o.check_grad_dtypes:
            raise self.fail(f"Gradient has dtype mismatch: {rows.wrong_dtype}")
        if rows.wrong_size:
            raise self.fail(f"Analytical gradient has incorrect size: {rows.wrong_size}")
        for i, difference in enumerate(rows.repeat_difference):
            if difference > o.nondet_tol:
                raise self.fail(messages.not_reentrant(o.nondet_tol, i, difference))

    def check_forward_dtypes(self, columns) -> None:
        if columns.dtype_mismatch and self.options.check_grad_dtypes:
            raise self.fail("Forward AD gradient has dtype mismatch.")

    def pair(self, stage, k: int, i: int, atol: float) -> messages.BlockPair:
        """The block of output ``k`` and input ``i`` of ``stage``, as its messages name it."""
        forward = stage.mode == Mode.FORWARD
        was_complex = stage.input_was_complex[i] if forward else stage.outputs[k].was_complex
        shapes = stage.inputs[i].shape, stage.outputs[k].shape
        part = stage.part if was_complex else None
        return messages.BlockPair(k, i, *shapes, self.options.rtol, atol, part, forward)

    def mismatch(self, stage, a, n, k: int, i: int, atol: float) -> str:
        return messages.mismatch(self.engine.format_block, a, n, self.pair(stage, k, i, atol))

    # -- stages --------------------------------------------------------------------------

    def jacobian_comparison(self, stage: JacobianComparison) -> None:
        runner = self.results.blocks
        if blockwise.applies(self.plan, stage, runner):
            return blockwise.judge(self, stage, runner)
        if self.options.analytical_first:  # their errors first (see CheckOptions.analytical_first)
            for units in stage.analytical:
                for unit in units:
                    self.value(unit)
        value = jacobians.window(self.value, stage.numerical_outputs)
        numerical = jacobians.numerical(value, stage.numerical, [s.numel for s in stage.inputs])
        if stage.mode == Mode.FORWARD:  # all forward Jacobians first, then the comparisons
            columns = [jacobians.forward(self.value, units) for units in stage.analytical]
            for c in columns:
                self.check_forward_dtypes(c)
            for k, output in enumerate(stage.outputs):
                self.compare_output(stage, k, [c.blocks[output.position] for c in columns], numerical)
            return
        for k, units in enumerate(stage.analytical):  # per output: its attributes, then its comparisons
            rows = jacobians.backward(self.value, units)
            self.check_attributes(rows)
            self.compare_output(stage, k, rows.blocks, numerical)

    def batched_comparison(self, stage: BatchedComparison) -> None:
        """The batched comparison decides a clear pass; anything else is judged by its
        element-by-element twin, whose failures (and their messages) are torch's."""
        reason = _clear_pass(self, stage.batched)
        if reason is None:
            self.counts.batched += 1
            return
        if self.run_more is not None:
            results = self.run_more(stage.exact_units)
        else:
            results = SerialExecutor().submit(self.plan.subject, stage.exact_units)
        try:
            plan = Plan(self.plan.subject, list(stage.exact_units), [stage.exact])
            Reducer(plan, results, self.options, self.engine, self.run_more).judge(stage.exact)
        except Exception:
            self.counts.fell_back(Fallback.FAILURE)
            raise
        finally:
            results.close()
        self.counts.fell_back(reason)

    def compare_output(self, stage, k: int, analytical: list[np.ndarray], numerical) -> None:
        o = self.options
        position = stage.outputs[k].position
        for i in range(len(stage.inputs)):
            a, n = analytical[i], numerical[i][position]
            if a is None:
                a = np.zeros_like(n)
            if not allclose(a, n, o.rtol, o.atol):
                raise attach(self.fail(self.mismatch(stage, a, n, k, i, o.atol)), self.blocks(stage, k, i, a, n))

    def projected_comparison(self, stage: ProjectedComparison) -> None:
        o, data = self.options, self.plan.subject.data
        numerical = jacobians.window(self.value, stage.numerical_outputs)
        projections = [numerical(unit) for unit in stage.numerical]  # [input][output position]: J u
        if stage.mode == Mode.FORWARD:
            columns = [self.value(unit) for unit in stage.analytical]
            for c in columns:
                self.check_forward_dtypes(c)

            def pair(i, k):
                position = stage.outputs[k].position
                tangent = columns[i].blocks[position]
                return tangent.reshape(-1), projections[i][position], None

        else:
            rows = [self.value(unit) for unit in stage.analytical]
            for r in rows:
                self.check_attributes(r)

            def pair(i, k):
                vj = rows[k].blocks[i].reshape(-1)
                u = [data[key] for key in stage.u[i]]
                a = vj.real @ u[0] + 1j * (vj.imag @ u[1]) if np.iscomplexobj(vj) else vj @ u[0]
                v = data[stage.v[k]]
                return np.asarray(a), np.asarray(np.sum(v * projections[i][stage.outputs[k].position])), v

        for i in range(len(stage.inputs)):
            u_sums = tuple(float(data[key].sum()) for key in stage.u[i])
            for k in range(len(stage.outputs)):
                a, n, v = pair(i, k)
                atol = adjusted_atol(o.atol, u_sums, None if v is None else float(v.sum()))
                if not allclose(a, n, o.rtol, atol):
                    explanation, blocks = self.explain(stage, i, k)
                    raise attach(self.fail(self.mismatch(stage, a, n, k, i, atol) + explanation), blocks)

    def blocks(self, stage, k: int, i: int, a, n) -> FailureBlocks:
        """The compared blocks, for reports (``error.blocks``)."""
        return FailureBlocks.of(self.pair(stage, k, i, self.options.atol), n, a, stage.mode)

    def explain(self, stage: ProjectedComparison, i: int, k: int) -> tuple[str, FailureBlocks | None]:
        """The full Jacobian blocks behind a failed projection (run now, in slow mode): the
        message's explanation, and the blocks."""
        if self.run_more is None:
            return "", None
        numerical_unit, analytical_unit = stage.explain(i, k)
        results = self.run_more([numerical_unit, analytical_unit])
        try:
            position = stage.outputs[k].position
            n = jacobians.numerical(lambda u: results.get(u).unwrap(), [[0]], [stage.inputs[i].numel])[0][position]
            if stage.mode == Mode.FORWARD:
                a = results.get(1).unwrap().blocks[position]
            else:
                a = results.get(1).unwrap().blocks[i]
        finally:
            results.close()
        if a is None:
            a = np.zeros_like(n)
        explanation = messages.slow_mode_explanation(
            self.engine.format_block(n),
            self.engine.format_block(a),
            max_abs_difference(n, a),
            allclose(a, n, self.options.rtol, self.options.atol),
        )
        return explanation, self.blocks(stage, k, i, a, n)

    def zero_numerical(self, stage: ZeroNumericalJacobian) -> None:
        for per_output in jacobians.numerical(self.value, stage.numerical, stage.numels):
            for jacobian in per_output:
                if jacobian is None or jacobian.size == 0:
                    continue
                if stage.tolerance is None:
                    nonzero = np.count_nonzero(jacobian != 0)  # NaN counts as nonzero
                else:
                    nonzero = max_abs_difference(jacobian, np.zeros_like(jacobian)) > stage.tolerance
                if nonzero:
                    raise self.fail("Numerical gradient for function expected to be zero")

    def auxiliary(self, stage: Auxiliary) -> None:
        self.value(stage.unit)


# the Reducer method that judges each kind of stage
_HANDLERS = {
    JacobianComparison: "jacobian_comparison",
    BatchedComparison: "batched_comparison",
    ProjectedComparison: "projected_comparison",
    ZeroNumericalJacobian: "zero_numerical",
    Auxiliary: "auxiliary",
}


class _NotClear(Exception):
    def __init__(self, reason: Fallback):
        super().__init__(reason)
        self.reason = reason


class _ClearPass(Reducer):
    """A batched comparison judged for a clear pass: the comparisons at :data:`CLEAR` of the
    tolerances (a zero Jacobian: exactly zero), sizes and dtypes as the reference wants them,
    the rows' two runs within ``nondet_tol``; what is not clear raises :class:`_NotClear`,
    with no message made."""

    def __init__(self, reducer: Reducer, stage: JacobianComparison | ZeroNumericalJacobian):
        o = reducer.options
        clear = replace(o, rtol=CLEAR * o.rtol, atol=CLEAR * o.atol)
        super().__init__(replace(reducer.plan, stages=[stage]), reducer.results, clear, reducer.engine)
        self.fail = lambda message: _NotClear(Fallback.NEAR_TOLERANCE)

    def jacobian_comparison(self, stage: JacobianComparison) -> None:
        """A backward-mode comparison tile by tile where its chunks are (``tiles``), else as
        the reducer makes it."""
        o = self.options
        if stage.mode == Mode.BACKWARD and not o.analytical_first:
            if not blockwise.applies(self.plan, stage, self.results.blocks):
                numerical = jacobians.window(self.value, stage.numerical_outputs)
                close = tiles.backward_close(stage, numerical, self.value, self.check_attributes, o.rtol, o.atol)
                if close is False:
                    raise _NotClear(Fallback.NEAR_TOLERANCE)
                if close:
                    return
        super().jacobian_comparison(stage)

    def check_attributes(self, rows) -> None:
        if rows.wrong_size or (rows.wrong_dtype and self.options.check_grad_dtypes):
            raise _NotClear(Fallback.ATTRIBUTES)
        if any(not difference <= self.options.nondet_tol for difference in rows.repeat_difference):
            raise _NotClear(Fallback.NONDETERMINISTIC)

    def check_forward_dtypes(self, columns) -> None:
        if columns.dtype_mismatch and self.options.check_grad_dtypes:
            raise _NotClear(Fallback.ATTRIBUTES)

    def mismatch(self, stage, a, n, k: int, i: int, atol: float) -> str:
        return ""

    def blocks(self, stage, k: int, i: int, a, n) -> None:
        return None


def _clear_pass(reducer: Reducer, stage: JacobianComparison | ZeroNumericalJacobian) -> Fallback | None:
    """None if the batched ``stage`` passes clearly, else why not."""
    try:
        _ClearPass(reducer, stage).judge(stage)
    except _NotClear as e:
        return e.reason
    except BatchRefused as e:
        return e.reason
    except Exception as e:  # a batch that failed: why
        return reducer.engine.batching_failure(e)
    return None


def reduce(
    plan: Plan,
    results: Results,
    options: CheckOptions,
    engine: Engine,
    run_more: RunMore | None = None,
    counts: BatchCounts | None = None,
) -> None:
    """Judge a plan's results; raises the first failure in the reference's order. ``counts``
    gets what the slow-mode comparisons were decided on."""
    Reducer(plan, results, options, engine, run_more, counts).run()


def assembled_jacobians(plan: Plan, results: Results) -> dict[tuple, np.ndarray]:
    """Every slow-mode Jacobian a plan computes, by ``(variant, mode, "numerical"|"analytical",
    input, output)``, without judging them: for tests and tools that compare executors."""
    value = lambda unit: results.get(unit).unwrap()  # noqa: E731
    found: dict[tuple, np.ndarray] = {}
    for stage in plan.stages:
        if isinstance(stage, BatchedComparison):
            stage = stage.batched
        if not isinstance(stage, JacobianComparison):
            continue
        numerical = jacobians.numerical(
            jacobians.window(value, stage.numerical_outputs), stage.numerical, [s.numel for s in stage.inputs]
        )
        if stage.mode == Mode.FORWARD:
            columns = [jacobians.forward(value, units) for units in stage.analytical]
        else:
            rows = [jacobians.backward(value, units) for units in stage.analytical]
        for k, output in enumerate(stage.outputs):
            for i in range(len(stage.inputs)):
                key = (stage.variant, stage.mode)
                found[key + ("numerical", i, k)] = numerical[i][output.position]
                analytical = columns[i].blocks[output.position] if stage.mode == Mode.FORWARD else rows[k].blocks[i]
                found[key + ("analytical", i, k)] = analytical
    return found
