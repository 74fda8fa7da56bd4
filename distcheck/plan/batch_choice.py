"""Whether one kind of a check's slow-mode work is batched, and how many items a batch holds:
decided on the driver while the check is planned, so that every executor runs the same plan.

The kinds of work are the numerical columns of one input, the analytical rows of one output and
the forward-mode columns of one input (a workload, one unit's worth before chunking). A
:class:`Batching` policy says how to decide. By default the workload's loop is estimated from
the CPU time of the check's first call of the function and, if that is not clearly too small,
timed on a few items and the whole estimated: too little work stays element by element (a batch has a fixed
cost, and so does deciding); otherwise one batch, spot check included, is timed against the
loop over as many items and kept only if it is at most :data:`FASTER` of the loop's time (a
workload of fewer than :data:`FEWEST_ITEMS` items is not worth timing). A workload of many
batches also has a small batch timed, kept where it is cheaper an item than the largest. A
batch holds at most ``most_items`` items and what the block budget allows (:class:`Held`), each
item :data:`HELD_FACTOR` times the check's inputs and outputs while it runs (a perturbed copy of
the inputs, the outputs on both sides and their difference, the function's intermediates:
measured 4 to 5 times for the numerical columns of conv2d + tanh and of its gradgradcheck
function, 1.5 to 2 times for their rows, as a batch's peak resident growth). The
budget is the process's (``$DISTCHECK_BLOCK_MB``), or the executor's policy's if smaller: with
the defaults every executor plans the same batches.

Decisions are remembered per process, by what the function computes
(:func:`~distcheck.engines.batched.function_key`), the kind of work and the inputs' shapes and
dtypes; that an op cannot be batched at all (a vmap error), by the op and kind of work alone, so
that another sample of it does not pay the failed attempt again. Whether a function sees its
input elsewhere than through its argument is asked of every check
(:func:`~distcheck.engines.batched.reads_elsewhere`): it is a property of the function object,
not of the op.
"""

from __future__ import annotations

import collections
import math
import threading
import time
from collections.abc import Hashable
from dataclasses import dataclass, field, replace
from typing import Any

from distcheck.engines import Engine
from distcheck.engines.batched import function_key, reads_elsewhere
from distcheck.errors import EngineCapabilityError
from distcheck.kinds import Fallback
from distcheck.options import Batching
from distcheck.plan.block_budget import default_block_bytes
from distcheck.plan.subject import Subject
from distcheck.plan.units import NumericalColumns, execute
from distcheck.plan.units.batches import BatchRefused

FASTER = 0.9  # a batch is kept when it takes at most this fraction of the loop over its items
HELD_FACTOR = 6  # what one item of a batch holds while it runs, in multiples of the check's inputs and outputs
LOOP_ITEMS = 2  # items the loop is timed on
# A workload of at least four batches also has a batch of this many items timed (the best of
# SMALL_ROUNDS), kept where it takes less an item than the largest batch: a larger batch is not
# always cheaper an item (an operation may change algorithm, or outgrow the caches, as the batch
# grows). A first call of a shape can take several times the later ones: the small batch is timed
# SMALL_ROUNDS times, and the largest again before the small one is kept.
SMALL_BATCH = 16
SMALL_ROUNDS = 3
LOOPED_TRIAL_ITEMS = 16  # items of the trial of a batch that loops where an operation has no batching rule
# A batch that loops is kept only at most this fraction of the loop over the same items: where it
# loops over the costly operation it gains little, and when the check then fails its work is done
# again element by element (for torch's message), so a marginal gain could cost twice the loop.
LOOPED_FASTER = 0.8
FEWEST_ITEMS = 8  # a workload of fewer items stays element by element, untimed
_REMEMBERED = 4096  # decisions kept per process (the oldest go first)
# vmap errors that say the op cannot be batched, whatever its sample
_OP_REASONS = {
    Fallback.NO_VMAP,
    Fallback.NO_BATCHING_RULE,
    Fallback.DYNAMIC_SHAPE,
    Fallback.ITEM,
    Fallback.RANDOMNESS,
    Fallback.AUTOGRAD_FUNCTION,
}


@dataclass(frozen=True)
class Decision:
    """A workload's batch size (0: element by element, for ``reason``), and the time one batch
    took when it was measured; ``trial``: that batch's result (the workload's first batch, as
    the plan makes it: its first unit starts from it), never remembered."""

    batch: int = 0
    reason: Fallback | None = None
    seconds: float | None = None
    trial: Any = field(default=None, compare=False, repr=False)
    loops: bool = False  # numerical columns: operations without a batching rule loop inside the batch


_lock = threading.Lock()
_remembered: collections.OrderedDict[Hashable, Decision] = collections.OrderedDict()


def forget() -> None:
    """Drop every remembered decision (tests; a process that changed what a function does)."""
    with _lock:
        _remembered.clear()


def _recall(key: Hashable | None) -> Decision | None:
    if key is None:
        return None
    with _lock:
        found = _remembered.get(key)
        if found is not None:
            _remembered.move_to_end(key)
        return found


def _remember(key: Hashable | None, decision: Decision) -> Decision:
    if key is not None:
        with _lock:
            _remembered[key] = replace(decision, trial=None)
            while len(_remembered) > _REMEMBERED:
                _remembered.popitem(last=False)
    return decision


def _keys(engine: Engine, subject: Subject, unit: Any) -> tuple[Hashable | None, Hashable | None]:
    """The workload's key for vmap errors (the op and kind of work) and for decisions (and the
    inputs' shapes and dtypes); None when the function says nothing of what it computes."""
    variant = subject.variants[unit.variant]
    function = function_key(variant.func)
    if function is None:
        return None, None
    where = unit.position if isinstance(unit, NumericalColumns) else getattr(unit, "output", getattr(unit, "input", 0))
    op = (function, type(unit).__name__, str(unit.variant), where)
    shapes = tuple((info.shape, info.dtype_name) for info in map(engine.info, filter(engine.is_tensor, variant.inputs)))
    return op, (op, shapes)


@dataclass(frozen=True)
class Held:
    """What one item of a batch holds while the batch runs (``running``) and in the unit's
    result (``result``), in bytes, and the budget of the executor's policy (infinite if none)."""

    running: float
    result: float
    policy_budget: float = math.inf

    def most(self, batching: Batching) -> int:
        """Items a batch may hold: all it holds within the block budget (the process's, or the
        policy's if smaller), its result within half of it (a block job holds two results)."""
        budget = min(default_block_bytes() if batching.budget is None else batching.budget, self.policy_budget)
        return int(min(budget // max(1.0, self.running), budget / 2 // max(1.0, self.result)))


def decide(
    policy: Batching,
    engine: Engine,
    subject: Subject,
    unit: Any,
    held: Held,
    tolerance: tuple[float, float],
    call_seconds: float | None = None,
) -> Decision:
    """The decision for the workload of ``unit`` (its items ``unit.start:unit.stop``, from 0):
    ``held`` says what one item of a batch holds, ``tolerance`` is the spot checks'.
    ``call_seconds``: one call of the function's CPU time, if known: a workload whose loop it
    puts under ``min_seconds`` is small without being timed."""
    if type(engine).batch_evaluate is Engine.batch_evaluate:  # the engine has no vectorizing map
        return Decision(reason=Fallback.NO_VMAP)
    if getattr(unit, "sparse", False):
        return Decision(reason=Fallback.SPARSE)
    items = unit.stop - unit.start
    batch = min(items, policy.most_items, held.most(policy))
    if items < (FEWEST_ITEMS if policy.measure else 2):
        return Decision(reason=Fallback.SMALL)
    if policy.measure and call_seconds is not None and _loop_calls(unit) * items * call_seconds < policy.min_seconds:
        return Decision(reason=Fallback.SMALL)
    if batch < 2:
        return Decision(reason=Fallback.MEMORY)
    op, key = _keys(engine, subject, unit)
    known = _recall(op) or _recall(key)
    if known is not None and known.reason is not None:
        return known
    if isinstance(unit, NumericalColumns) and _reads_elsewhere(engine, subject, unit):
        return Decision(reason=Fallback.CLOSURE)
    if known is not None or not policy.measure:
        return known or Decision(batch)
    decision = _measure(policy, engine, subject, unit, batch, tolerance)
    return _remember(op if decision.reason in _OP_REASONS else key, decision)


def _loop_calls(unit: Any) -> int:
    """About how many calls of the function the loop makes per item: two evaluations per
    column (four for a complex input), two backward passes per row, two for a forward column."""
    return 4 if getattr(unit, "is_complex", False) else 2


def _reads_elsewhere(engine: Engine, subject: Subject, unit: NumericalColumns) -> bool:
    """:func:`~distcheck.engines.batched.reads_elsewhere`, True if asking raises (the function
    fails on a copy of its input: left to the element-by-element path). The engine's global RNG
    is left as it was."""
    variant = subject.variants[unit.variant]
    state = engine.rng_state()
    try:
        return reads_elsewhere(engine, variant.func, variant.inputs, unit.position)
    except Exception:
        return True
    finally:
        if state is not None:
            engine.set_rng_state(state)


def _measure(
    policy: Batching, engine: Engine, subject: Subject, unit: Any, batch: int, tolerance: tuple[float, float]
) -> Decision:
    """Time the loop on :data:`LOOP_ITEMS` items, then (if the workload is worth it) the
    largest batch, the workload's first; a workload of at least four of them has a batch of
    :data:`SMALL_BATCH` items timed too (the best of :data:`SMALL_ROUNDS`), kept where it is
    cheaper an item. The engine's global RNG is left as it was (a function that
    draws random numbers)."""
    items = unit.stop - unit.start
    state = engine.rng_state()
    try:
        loop = _timed(engine, subject, replace(unit, stop=unit.start + min(LOOP_ITEMS, items)))
        if isinstance(loop, Exception):  # the loop itself fails: the exact path says how
            return Decision(reason=Fallback.FAILURE)
        per_item = loop.seconds / min(LOOP_ITEMS, items)
        if per_item * items < policy.min_seconds:
            return Decision(reason=Fallback.SMALL)
        trial = replace(unit, stop=unit.start + batch, batch=batch, spot_tolerance=tolerance)
        small = None
        if items >= 4 * batch and batch >= 4 * SMALL_BATCH:  # a workload of several batches: a small one too
            small_trial = replace(trial, stop=unit.start + SMALL_BATCH, batch=SMALL_BATCH)
            small = _trial(engine, subject, small_trial, SMALL_ROUNDS)
        if isinstance(small, Exception):  # what a batch raises, found on the fewest items
            decision = _decided(engine, small, SMALL_BATCH, 0.0)
        else:
            timed = _trial(engine, subject, trial, 1)
            if not isinstance(timed, Exception):  # timed again where it loses (to the loop, or to a small
                # batch an item): a first call of a shape pays one-off costs
                if timed.seconds > FASTER * per_item * batch if small is None else _cheaper(small, timed, batch):
                    timed = _trial(engine, subject, trial, 1, timed)
            size = batch
            if small is not None and _cheaper(small, timed, batch):
                size, timed = SMALL_BATCH, small
            decision = _decided(engine, timed, size, FASTER * per_item * size)
        if decision.reason == Fallback.NO_BATCHING_RULE and isinstance(unit, NumericalColumns):
            decision = _looped(engine, subject, unit, trial) or decision
    finally:
        if state is not None:
            engine.set_rng_state(state)
    return decision


def _cheaper(small: _Timed, timed: _Timed | Exception, batch: int) -> bool:
    """The small batch took less an item than ``timed``, a batch of ``batch`` items."""
    return not isinstance(timed, Exception) and small.seconds * batch < timed.seconds * SMALL_BATCH


def _trial(engine: Engine, subject: Subject, trial: Any, rounds: int, best: _Timed | None = None) -> _Timed | Exception:
    """A trial batch's fastest time of ``rounds`` (and ``best``'s) with its result, or the
    exception it raised."""
    for _ in range(rounds):
        timed = _timed(engine, subject, trial)
        if isinstance(timed, Exception):
            return timed
        best = timed if best is None or timed.seconds < best.seconds else best
    return best


def _decided(engine: Engine, timed: _Timed | Exception, batch: int, budget: float) -> Decision:
    """The decision a timed trial batch makes: kept within ``budget`` seconds, else why not."""
    if isinstance(timed, BatchRefused):
        return Decision(reason=timed.reason)
    if isinstance(timed, EngineCapabilityError):
        return Decision(reason=Fallback.NO_VMAP)
    if isinstance(timed, Exception):
        return Decision(reason=engine.batching_failure(timed))
    if timed.seconds > budget:
        return Decision(reason=Fallback.SLOWER, seconds=timed.seconds)
    return Decision(batch, seconds=timed.seconds, trial=timed.value)


def _looped(engine: Engine, subject: Subject, unit: Any, trial: Any) -> Decision | None:
    """Numerical columns whose function has an operation without a batching rule: a batch in
    which that operation alone loops over the items (the rest batched), timed on at most
    :data:`LOOPED_TRIAL_ITEMS` items against the loop over the same items (not the estimate of a
    few: such a gain is small enough for that estimate's error to decide it), kept at most
    :data:`LOOPED_FASTER` of it; the decision if it is kept, else None (the op stays element by
    element, remembered as having no batching rule). ``unit``: the workload; ``trial``: its
    first batch."""
    items = min(trial.batch, LOOPED_TRIAL_ITEMS)
    loop = _timed(engine, subject, replace(unit, stop=unit.start + items))  # the workload itself, element by element
    small = replace(trial, stop=trial.start + items, loops=True)
    timed = _timed(engine, subject, small)
    if isinstance(loop, Exception) or isinstance(timed, Exception) or timed.seconds > LOOPED_FASTER * loop.seconds:
        return None
    kept = timed.value if items == trial.batch else None  # the workload's first batch, if it is one
    return Decision(trial.batch, seconds=timed.seconds * trial.batch / items, trial=kept, loops=True)


@dataclass(frozen=True)
class _Timed:
    seconds: float
    value: Any


def _timed(engine: Engine, subject: Subject, unit: Any) -> _Timed | Exception:
    """Seconds of CPU ``unit`` takes on one intra-op thread and its result, or the exception it
    raised. CPU, not wall time: on a shared machine a batch, longer than the loop's few items,
    is more often waiting for a core, and would look slower than it is."""
    start = time.process_time()
    result = execute(unit, subject, threads=1)
    return result.error if result.error is not None else _Timed(time.process_time() - start, result.value)
