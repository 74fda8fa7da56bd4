"""One gradient check, end to end: validate → plan → execute → reduce."""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from distcheck.engines import Engine, TensorInfo, checks, derivatives, engine_for, reference_scope
from distcheck.engines.reference import reference_call
from distcheck.engines.tuples import as_tuple
from distcheck.errors import GradcheckError
from distcheck.executors import Executor
from distcheck.options import CheckOptions
from distcheck.plan.builder import Costs
from distcheck.plan.cost_model import best_time, work_seconds
from distcheck.plan.planner import Plan, plan_gradcheck
from distcheck.reduce.counts import BatchCounts
from distcheck.reduce.reducer import reduce

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _user_stacklevel() -> int:
    """warnings.warn stacklevel of the first caller outside distcheck."""
    import sys

    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    return level


def validate_inputs(engine: Engine, func: Callable, inputs: tuple) -> list[TensorInfo | None]:
    """The reference's input checks: something requires grad, no stride-0 (overlapping) input;
    a warning for inputs that are not double precision."""
    infos: list[TensorInfo | None] = []
    any_requires_grad = False
    for idx, value in enumerate(inputs):
        info = engine.info(value, func, idx) if engine.is_tensor(value) else None
        infos.append(info)
        if info is None or not info.requires_grad:
            continue
        if not info.is_double:
            warnings.warn(
                f"Input #{idx} requires gradient and is not a double precision floating point or complex. "
                "This check will likely fail if all the inputs are not of double precision floating point "
                "or complex. ",
                stacklevel=_user_stacklevel(),
            )
        if info.overlapping:
            raise RuntimeError(
                f"The {idx}th input has a dimension with stride 0. gradcheck only supports inputs that are "
                "non-overlapping to be able to compute the numerical gradients correctly. You should call "
                ".contiguous on the input before passing it to gradcheck."
            )
        any_requires_grad = True
    if not any_requires_grad:
        raise ValueError(
            "gradcheck expects at least one input tensor to require gradient, but none of them have requires_grad=True."
        )
    return infos


def describe_outputs(engine: Engine, outputs: tuple) -> list[TensorInfo | None]:
    infos: list[TensorInfo | None] = []
    for k, o in enumerate(outputs):
        if not engine.is_tensor(o):
            raise TypeError(
                f"gradcheck: func must return a tensor or a tuple of tensors, but output {k} is a {type(o).__name__}"
            )
        infos.append(engine.info(o))
    engine.check_outputs(outputs)
    return infos


def measure_costs(
    engine: Engine,
    func: Callable,
    inputs: tuple,
    output_infos,
    input_infos,
    limits: Sequence[float] = (math.inf,),
    best: Costs | None = None,
) -> Costs:
    """The time of one evaluation and of one backward pass (the first differentiable output's
    rows; an evaluation's where an output is complex): the best of up to ``len(limits)``
    timings of each (:func:`best_time`), ``best``'s counted as a first round. The engine's
    global RNG is left as it was: calls the reference does not make must not move it (a
    function that draws random numbers; a test draws its next samples after the check). The
    backward pass differentiates the reference call of the current reference scope."""
    taken = best or Costs(math.inf, math.inf)
    state = engine.rng_state()
    try:
        evaluation = backward = best_time(lambda: engine.call(func, inputs), limits, best=taken.evaluation)
        diff_inputs = [p for p, i in enumerate(input_infos) if i is not None and i.requires_grad]
        diff_outputs = [p for p, o in enumerate(output_infos) if o is not None and o.requires_grad and o.numel]
        if diff_outputs and diff_inputs and not any(o.is_complex for o in output_infos if o is not None):
            vjp = derivatives.row_vjp(engine, func, inputs, diff_outputs[0], diff_inputs)
            backward = best_time(lambda: vjp(0), limits, best=taken.backward)
    finally:
        if state is not None:
            engine.set_rng_state(state)
    return Costs(evaluation, backward)


def plan_check(func: Callable, inputs: Any, options: CheckOptions, executor: Executor) -> tuple[Engine, Plan]:
    """Validate a check and plan it for ``executor``. A policy that sizes work in seconds gets
    one timing of each call first; unless the check's work so estimated is under the policy's
    ``settled_below`` (a plan that the best timings could not change), the calls are timed
    again and the check planned anew, its RNG draws made again from the same state."""
    tupled = as_tuple(inputs)
    engine = engine_for(func, tupled)
    input_infos = validate_inputs(engine, func, tupled)
    started = time.process_time()  # one call's CPU: what batching a check's work could save
    output_infos = describe_outputs(engine, reference_call(engine, func, tupled))
    call_seconds = time.process_time() - started
    policy = executor.policy
    measured: list[Costs] = []

    def measure() -> Costs:
        # once each; then, after those single timings, the best of up to three, the first counted
        limits = (0.1, 0.0) if measured else (math.inf,)
        measured.append(measure_costs(engine, func, tupled, output_infos, input_infos, limits, *measured[:1]))
        return measured[-1]

    def plan() -> Plan:
        costs, once = measure, call_seconds
        return plan_gradcheck(engine, func, tupled, input_infos, output_infos, options, policy, costs, once)

    planned = plan()
    if measured and not _settled(planned, getattr(policy, "settled_below", 0.0)):
        if planned.rng_marks:
            engine.set_rng_state(planned.rng_marks[0])
        planned = plan()
    return engine, planned


def _settled(plan: Plan, below: float) -> bool:
    return below > 0 and work_seconds(plan.units, plan.subject.costs) < below


def run_check(
    func: Callable, inputs: Any, options: CheckOptions, executor: Executor, counts: BatchCounts | None = None
) -> None:
    """Run one gradient check; returns if it passes, raises the first failure otherwise. The
    check's reference call (and its graph) lives as long as the check. ``counts`` gets what
    its slow-mode Jacobian comparisons were decided on (batched blocks, or why not)."""
    with reference_scope():
        engine, plan = plan_check(func, inputs, options, executor)
        results = executor.submit(plan.subject, plan.units)
        try:
            run_more = lambda units: executor.submit(plan.subject, units)  # noqa: E731
            reduce(plan, results, options, engine, run_more, counts)
        finally:
            results.close()


def passes(
    func: Callable,
    inputs: Any,
    options: CheckOptions,
    executor: Executor,
    raise_exception: bool = True,
    counts: BatchCounts | None = None,
) -> bool:
    """gradcheck's result: True if the check passes; its failure raised, or False if
    ``raise_exception`` is False. ``counts``: see :func:`run_check`."""
    try:
        run_check(func, inputs, options, executor, counts)
    except GradcheckError:
        if raise_exception:
            raise
        return False
    return True


def gradcheck(
    func: Callable,
    inputs: Any,
    executor: Executor,
    *,
    raise_exception: bool = True,
    batch_counts: BatchCounts | None = None,
    **options: Any,
) -> bool:
    """:func:`passes`, with gradcheck's keyword arguments (those of :class:`CheckOptions`)."""
    return passes(func, inputs, CheckOptions(**options), executor, raise_exception, batch_counts)


def gradgradcheck(
    func: Callable,
    inputs: Any,
    executor: Executor,
    grad_outputs: Any = None,
    *,
    gen_non_contig_grad_outputs: bool = False,
    check_fwd_over_rev: bool = False,
    check_rev_over_rev: bool = True,
    check_undefined_grad: bool = True,
    check_batched_grad: bool = False,
    masked: bool = False,
    **options: Any,
) -> bool:
    """gradcheck of ``(inputs, grad_outputs) -> grads``, with gradgradcheck's keyword arguments
    (its own, and gradcheck's ``eps``, ``atol``, ``rtol``, ``nondet_tol``, ``check_grad_dtypes``,
    ``fast_mode``, ``raise_exception``). Random grad-outputs (uniform in [-1, 1], from the
    engine's global RNG) are made when none are given."""
    if not (check_fwd_over_rev or check_rev_over_rev):
        raise AssertionError("Expected at least one of check_fwd_over_rev or check_rev_over_rev to be True")
    if check_undefined_grad and not check_rev_over_rev:
        raise AssertionError("Setting check_undefined_grad=True requires check_rev_over_rev to be True")
    if check_batched_grad and not check_rev_over_rev:
        raise AssertionError("Setting check_batched_grad=True requires check_rev_over_rev to be True")
    tupled = as_tuple(inputs)
    engine = engine_for(func, tupled)
    if grad_outputs is None:
        with reference_scope():
            grad_outputs = checks.default_grad_outputs(engine, func, tupled, gen_non_contig_grad_outputs)
    derived, derived_inputs = checks.grad_function(engine, func, tupled, as_tuple(grad_outputs))
    return gradcheck(
        derived,
        derived_inputs,
        executor,
        check_undefined_grad=check_undefined_grad,
        check_batched_grad=check_batched_grad,
        check_forward_ad=check_fwd_over_rev,
        check_backward_ad=check_rev_over_rev,
        masked=masked,
        **options,
    )
