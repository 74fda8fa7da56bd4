"""The reducer: assembles unit results into Jacobians and judges them, stage by stage, in the
reference's order, raising the first failure (a GradcheckError or the exception a unit raised).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from distcheck.engines import Engine
from distcheck.executors.base import Results
from distcheck.numerics.compare import allclose
from distcheck.options import CheckOptions
from distcheck.plan.planner import Plan
from distcheck.plan.stages import Auxiliary, JacobianComparison, ZeroNumericalJacobian
from distcheck.plan.units import RowsResult
from distcheck.reduce import messages


class Reducer:
    def __init__(self, plan: Plan, results: Results, options: CheckOptions, engine: Engine):
        self.plan, self.results, self.options, self.engine = plan, results, options, engine
        self.fail: Callable[[str], Exception] = engine.error_class

    def run(self) -> None:
        handlers = {
            JacobianComparison: self.jacobian_comparison,
            ZeroNumericalJacobian: self.zero_numerical,
            Auxiliary: self.auxiliary,
        }
        for stage in self.plan.stages:
            handlers[type(stage)](stage)

    def value(self, unit: int):
        return self.results.get(unit).unwrap()

    def numerical_jacobians(self, units_per_input: tuple[tuple[int, ...], ...]) -> list[list[np.ndarray | None]]:
        """``[input][output position]`` numerical Jacobians, stacked from column chunks."""
        jacobians = []
        for units in units_per_input:
            chunks = [self.value(u) for u in units]
            jacobians.append([None if parts[0] is None else np.concatenate(parts, axis=0) for parts in zip(*chunks)])
        return jacobians

    def analytical_jacobians(self, units: tuple[int, ...]) -> RowsResult:
        """One output's analytical Jacobians (one per input), stacked from row chunks."""
        chunks: list[RowsResult] = [self.value(u) for u in units]
        blocks = [np.concatenate(parts, axis=1) for parts in zip(*(c.blocks for c in chunks))]
        # NaN propagates as in torch's max(): a NaN difference never fails reentrancy
        repeat = [float(np.max(d)) for d in zip(*(c.repeat_difference for c in chunks))]
        wrong_size = next((c.wrong_size for c in chunks if c.wrong_size), None)
        wrong_dtype = next((c.wrong_dtype for c in chunks if c.wrong_dtype), None)
        return RowsResult(blocks, repeat, wrong_size, wrong_dtype)

    def jacobian_comparison(self, stage: JacobianComparison) -> None:
        o = self.options
        numerical = self.numerical_jacobians(stage.numerical)
        for k, output in enumerate(stage.outputs):
            analytical = self.analytical_jacobians(stage.analytical[k])
            # Sizes are always checked, dtypes with check_grad_dtypes. (torch 2.13 swaps the two
            # flags internally; its autograd engine coerces gradients so neither can differ there.)
            if analytical.wrong_dtype and o.check_grad_dtypes:
                raise self.fail(f"Gradient has dtype mismatch: {analytical.wrong_dtype}")
            if analytical.wrong_size:
                raise self.fail(f"Analytical gradient has incorrect size: {analytical.wrong_size}")
            for i, difference in enumerate(analytical.repeat_difference):
                if difference > o.nondet_tol:
                    raise self.fail(messages.not_reentrant(o.nondet_tol, i, difference))
            for i, slot in enumerate(stage.inputs):
                a, n = analytical.blocks[i], numerical[i][output.position]
                if not allclose(a, n, o.rtol, o.atol):
                    raise self.fail(
                        messages.mismatch(
                            self.engine.format_block,
                            a,
                            n,
                            k,
                            i,
                            rtol=o.rtol,
                            atol=o.atol,
                            input_shape=slot.shape,
                            output_shape=output.shape,
                            part=stage.part if output.was_complex else None,
                        )
                    )

    def zero_numerical(self, stage: ZeroNumericalJacobian) -> None:
        for per_output in self.numerical_jacobians(stage.numerical):
            for jacobian in per_output:
                if jacobian is not None and np.count_nonzero(jacobian != 0):  # NaN counts as nonzero
                    raise self.fail("Numerical gradient for function expected to be zero")

    def auxiliary(self, stage: Auxiliary) -> None:
        self.value(stage.unit)


def reduce(plan: Plan, results: Results, options: CheckOptions, engine: Engine) -> None:
    """Judge a plan's results; raises the first failure in the reference's order."""
    Reducer(plan, results, options, engine).run()


def assembled_jacobians(plan: Plan, results: Results) -> dict[tuple, np.ndarray]:
    """Every Jacobian a plan computes, by ``(variant, "numerical"|"analytical", input, output)``
    (without judging them): for tests and tools that compare executors."""
    reducer = Reducer(plan, results, CheckOptions(), _NoEngine())
    jacobians: dict[tuple, np.ndarray] = {}
    for stage in plan.stages:
        if isinstance(stage, JacobianComparison):
            numerical = reducer.numerical_jacobians(stage.numerical)
            for k, output in enumerate(stage.outputs):
                analytical = reducer.analytical_jacobians(stage.analytical[k])
                for i in range(len(stage.inputs)):
                    jacobians[(stage.variant, "numerical", i, k)] = numerical[i][output.position]
                    jacobians[(stage.variant, "analytical", i, k)] = analytical.blocks[i]
    return jacobians


class _NoEngine:
    error_class = RuntimeError
