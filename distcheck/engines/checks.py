"""The auxiliary checks, written once on the engine primitives (torch's semantics), and
gradgradcheck's derived function.

Each check decides whether something failed; the engine's :class:`~distcheck.engines.wording.Wording`
says how the failure reads. Comparisons of values happen on numpy copies, with torch.allclose's
defaults where torch compares (rtol 1e-5, atol 1e-8).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from distcheck.engines.batched import function_key, vectorizable
from distcheck.engines.derivatives import diff_inputs, diff_outputs, float_outputs
from distcheck.engines.reference import reference_call
from distcheck.engines.registry import get_engine
from distcheck.errors import EngineCapabilityError
from distcheck.numerics.compare import allclose

if TYPE_CHECKING:
    from distcheck.engines.base import Engine

_RTOL, _ATOL = 1e-5, 1e-8  # torch.allclose's defaults


def _positions(engine: Engine, func: Callable, inputs: tuple) -> list[int]:
    positions = diff_inputs(engine, func, inputs)
    if not positions:
        raise engine.error_class(engine.wording.no_inputs)
    return positions


def check_zero_grad_output(engine: Engine, func: Callable, inputs: tuple, masked: bool) -> None:
    """Zero grad-outputs must give zero gradients, of their inputs' layout, dtype, device and size."""
    fail, say = engine.error_class, engine.wording
    positions = _positions(engine, func, inputs)
    outputs = reference_call(engine, func, inputs)
    selected = diff_outputs(engine, outputs)
    pullback = engine.pullback(func, inputs, outputs, positions, selected)
    grads = pullback([engine.zeros_like(outputs[p]) for p in selected])
    for k, (g, p) in enumerate(zip(grads, positions)):
        if g is None:
            continue
        layout = engine.grad_layout_error(g, inputs[p])
        if layout is not None:
            raise fail(layout)
        values = engine.to_numpy(g)
        is_zero = np.allclose(values, 0) if masked else not np.any(values != 0)  # NaN is nonzero
        if not is_zero:
            raise fail(say.zero_grad_nonzero(k, values))
        grad, value = engine.info(g), engine.info(inputs[p], func, p)
        if grad.dtype_name != value.dtype_name:
            raise fail(say.grad_type(grad, value, k))
        if grad.device != value.device:
            raise fail(say.grad_device(grad, value, k))
        if grad.shape != value.shape:
            raise fail(say.grad_size(grad, value, k))


def check_undefined_grad(engine: Engine, func: Callable, inputs: tuple) -> None:
    """Backward must accept undefined grad-outputs (all at once, then one at a time with several
    outputs) and give undefined or zero gradients. Every case differentiates the reference call,
    as the other checks do (torch's gradcheck calls the function again for each case: 1 + one
    per output with several outputs, each a backward pass for gradgradcheck; the graph is the
    same, and so is what its backward does with undefined grads)."""
    positions = _positions(engine, func, inputs)
    outputs = reference_call(engine, func, inputs)
    selected = diff_outputs(engine, outputs)
    _undefined_case(engine, func, inputs, positions, "all output grads undefined", outputs, [None] * len(selected))
    if len(selected) > 1:
        for k in range(len(selected)):
            cotangents = [None if j == k else engine.zeros_like(outputs[p]) for j, p in enumerate(selected)]
            _undefined_case(engine, func, inputs, positions, f"the grad of output {k} undefined", outputs, cotangents)


def _undefined_case(engine: Engine, func, inputs, positions, label: str, outputs: tuple, cotangents: list) -> None:
    fail, say = engine.error_class, engine.wording
    try:
        grads = engine.pullback(func, inputs, outputs, positions, diff_outputs(engine, outputs))(cotangents)
    except Exception as e:
        message = say.undefined_raised(label, e)
        if message is None:
            raise
        raise fail(message) from e
    for position, g in enumerate(grads):
        if g is None:
            continue
        values = engine.to_numpy(g)
        if np.any(values != 0):
            raise fail(say.undefined_nonzero(label, position, values))


def check_undefined_forward_grad(engine: Engine, func: Callable, inputs: tuple, tangents: Sequence[np.ndarray]) -> None:
    """For each differentiable input in turn, a zero tangent and an absent one must give the same
    output tangents (the other inputs carrying ``tangents``)."""
    positions = diff_inputs(engine, func, inputs)
    what, flag = "Checking undefined forward-mode tangents", "check_forward_ad"
    pushforward = _pushforward(engine, func, inputs, positions, what, flag)
    given = [_engine_array(engine, t, inputs[p]) for t, p in zip(tangents, positions)]
    for k, p in enumerate(positions):
        zero, absent = list(given), list(given)
        zero[k], absent[k] = engine.zeros_like(inputs[p]), None
        for index, (t1, t2) in enumerate(zip(pushforward(zero), pushforward(absent))):
            if t1 is None or t2 is None:
                continue
            if not allclose(engine.to_numpy(t1), engine.to_numpy(t2), rtol=_RTOL, atol=_ATOL):
                raise engine.error_class(engine.wording.undefined_tangent(index, k, inputs[p], t1, t2))


def _pushforward(engine: Engine, func: Callable, inputs: tuple, positions: list[int], what: str, flag: str):
    try:
        return engine.pushforward(func, inputs, positions)
    except EngineCapabilityError as e:
        raise engine.wording.missing(e, what, flag) from None


def _engine_array(engine: Engine, values: np.ndarray, like: Any) -> Any:
    return engine.from_numpy(np.asarray(values).reshape(engine.shape(like)), like=like)


def check_batched_grad(
    engine: Engine, func: Callable, inputs: tuple, output_position: int, grad_outputs: Sequence[np.ndarray]
) -> None:
    """VJPs of ``outputs[output_position]`` for the stacked ``grad_outputs`` in one vmap call must
    equal separate calls."""
    outputs = reference_call(engine, func, inputs)
    output = outputs[output_position]
    positions = diff_inputs(engine, func, inputs)
    pullback = engine.pullback(func, inputs, outputs, positions, [output_position])
    wrt = [inputs[p] for p in positions]

    def vjp(v: Any) -> tuple:
        return tuple(engine.zeros_like(x) if g is None else g for g, x in zip(pullback([v]), wrt))

    vectors = [_engine_array(engine, g, output) for g in grad_outputs]
    _compare_batched(engine, vjp, vectors, output_position, forward=False)


def check_batched_forward_grad(
    engine: Engine, func: Callable, inputs: tuple, position: int, tangents: Sequence[np.ndarray]
) -> None:
    """JVPs for the stacked ``tangents`` on input ``position`` in one vmap call must equal separate calls."""
    what, flag = "Checking batched forward-mode gradients", "check_batched_forward_grad"
    pushforward = _pushforward(engine, func, inputs, [position], what, flag)
    outputs = engine.call(func, inputs)
    primals = [outputs[p] for p in float_outputs(engine, outputs)]

    def jvp(t: Any) -> tuple:
        return tuple(engine.zeros_like(o) if d is None else d for d, o in zip(pushforward([t]), primals))

    vectors = [_engine_array(engine, t, inputs[position]) for t in tangents]
    _compare_batched(engine, jvp, vectors, position, forward=True)


def _compare_batched(engine: Engine, function: Callable, vectors: list, index: int, forward: bool) -> None:
    """``function`` vmapped over the stacked ``vectors`` against separate calls. ``index``: the
    output (backward) or input (forward) the vectors belong to."""
    say = engine.wording
    separate = [function(v) for v in vectors]
    expected = [engine.stack(shards) for shards in zip(*separate)]
    stacked = engine.from_numpy(np.stack([engine.to_numpy(v) for v in vectors]), like=vectors[0])
    try:
        batched = [engine.to_numpy(r) for r in engine.vmap(function, stacked)]
    except EngineCapabilityError:
        raise
    except Exception as e:
        message = say.batched_error(e, forward)
        if message is None:
            raise
        raise engine.error_class(message) from e
    for other, (res, exp) in enumerate(zip(batched, expected)):
        if res.shape != exp.shape or not allclose(res, exp, rtol=_RTOL, atol=_ATOL):
            got, want = engine.format_block(res), engine.format_block(exp)
            output, position = (other, index) if forward else (index, other)
            raise engine.error_class(say.batched_mismatch(output, position, got, want, forward))


def default_grad_outputs(engine: Engine, func: Callable, inputs: tuple, noncontiguous: bool) -> tuple:
    """gradgradcheck's random grad-outputs, one per differentiable output of the reference call."""
    outputs = reference_call(engine, func, inputs)
    return engine.random_grad_outputs([outputs[p] for p in diff_outputs(engine, outputs)], noncontiguous)


class GradOfOutputs:
    """gradgradcheck's function: ``(*inputs, *grad_outputs) -> d(outputs)/d(inputs)·grad_outputs``,
    built with the engine's pullback (``create_graph``) so that it can be differentiated again;
    unused inputs (None gradients) are left out, as torch's gradgradcheck does."""

    def __init__(
        self, engine: str, func: Callable, n_inputs: int, diff_inputs: frozenset, diff_grad_outputs: frozenset
    ):
        self.engine, self.func, self.n_inputs = engine, func, n_inputs
        self.diff_inputs, self.diff_grad_outputs = diff_inputs, diff_grad_outputs

    def __call__(self, *args):
        engine = get_engine(self.engine)
        inputs, grad_outputs = self._tracked(engine, args)
        outputs = engine.call(self.func, inputs)
        selected = diff_outputs(engine, outputs)
        positions = sorted(self.diff_inputs)
        pullback = engine.pullback(self.func, inputs, outputs, positions, selected, create_graph=True)
        return tuple(g for g in pullback(list(grad_outputs)) if g is not None)

    def _tracked(self, engine: Engine, args: tuple) -> tuple[tuple, tuple]:
        inputs = tuple(engine.track(x) if i in self.diff_inputs else x for i, x in enumerate(args[: self.n_inputs]))
        grad_outputs = tuple(
            engine.track(g) if i in self.diff_grad_outputs else g for i, g in enumerate(args[self.n_inputs :])
        )
        return inputs, grad_outputs

    @property
    def batch_key(self) -> Hashable | None:
        inner = function_key(self.func)
        return None if inner is None else ("grad of", inner)

    def vectorizable(self, args: tuple) -> TransformedGrad:
        """This function as the engine's function transforms compute it (the same values, for
        the vectorizing map, which cannot map autograd's ``grad``): the outputs differentiated,
        and the inputs whose gradients exist, as a call at ``args`` finds them."""
        engine = get_engine(self.engine)
        inputs, grad_outputs = self._tracked(engine, args)
        outputs = engine.call(self.func, inputs)
        selected = tuple(diff_outputs(engine, outputs))
        positions = tuple(sorted(self.diff_inputs))
        grads = engine.pullback(self.func, inputs, outputs, positions, selected)(list(grad_outputs))
        kept = tuple(g is not None for g in grads)
        return TransformedGrad(self.engine, vectorizable(self.func, inputs), self.n_inputs, positions, selected, kept)


class TransformedGrad:
    """:class:`GradOfOutputs` on the engine's :meth:`~distcheck.engines.base.Engine.transform_pullback`:
    the gradients of the ``selected`` outputs with respect to the inputs at ``positions``, those
    where ``kept``."""

    def __init__(self, engine: str, func: Callable, n_inputs: int, positions: tuple, selected: tuple, kept: tuple):
        self.engine, self.func, self.n_inputs = engine, func, n_inputs
        self.positions, self.selected, self.kept = positions, selected, kept

    def __call__(self, *args):
        engine = get_engine(self.engine)
        pullback = engine.transform_pullback(self.func, args[: self.n_inputs], self.positions, self.selected)
        return tuple(g for g, keep in zip(pullback(list(args[self.n_inputs :])), self.kept) if keep)


def grad_function(engine: Engine, func: Callable, inputs: tuple, grad_outputs: tuple) -> tuple[Callable, tuple]:
    """gradgradcheck's derived function and its inputs: the engine's own construction
    (:meth:`Engine.grad_function`), else :class:`GradOfOutputs`."""
    own = engine.grad_function(func, inputs, grad_outputs)
    if own is not None:
        return own
    diff_grad_outputs = frozenset(i for i, g in enumerate(grad_outputs) if engine.requires_grad(g))
    diff = frozenset(diff_inputs(engine, func, inputs))
    derived = GradOfOutputs(engine.name, func, len(inputs), diff, diff_grad_outputs)
    return derived, tuple(inputs) + tuple(grad_outputs)
