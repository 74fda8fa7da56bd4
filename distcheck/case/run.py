"""One case where it lands (a runner on a worker, a split case's coordinator, this process):
rebuilt from its id, the fingerprint of its inputs compared with the listed one, estimated,
then checked; its record made there.

Every step's failure is a verdict, never an exception: a runner must go on with the others.
"""

from __future__ import annotations

import gc
import time
import warnings
from dataclasses import dataclass

from distcheck.case import probe
from distcheck.case.budget import SKIP, SPLIT, Budget, Estimate, estimate, has_slow_calls
from distcheck.case.judge import distcheck_checker, judged, raised
from distcheck.engines import get_engine
from distcheck.executors import Executor
from distcheck.executors.serial import SerialExecutor
from distcheck.kinds import Verdict
from distcheck.records.case_record import ERROR, SKIPPED, TIMEOUT, CaseRecord
from distcheck.records.tracebacks import traceback_of
from distcheck.reduce.counts import BatchCounts
from distcheck.storage.blocks import CaseBlocks, bounded, encoded, file_name
from distcheck.suites.base import BuiltCase, CaseId, CaseInfo, Suite

_prepared: set[str] = set()


def prepare(suite: Suite) -> None:
    """Load what the suite needs in this process (its engine's library, its database), once;
    then keep it out of the garbage collector's sight (an op database is hundreds of thousands
    of objects, which every full collection the cases' allocations trigger would go over)."""
    if suite.name not in _prepared:
        get_engine(suite.engine)
        suite.prepare()
        gc.freeze()
        _prepared.add(suite.name)


@dataclass(frozen=True)
class Outcome:
    """What running a case where it landed gave: its verdict. ``fingerprint`` is that of the
    inputs actually rebuilt; ``blocks``: the bounded Jacobian blocks of a failed comparison;
    ``traceback``: an error's, bounded (see :func:`~distcheck.records.tracebacks.traceback_of`); ``counts``: what
    its slow-mode Jacobian comparisons were decided on (None: none counted)."""

    verdict: Verdict
    message: str = ""
    seconds: float = 0.0
    fingerprint: str | None = None
    estimate: Estimate | None = None
    blocks: CaseBlocks | None = None
    traceback: str | None = None
    counts: BatchCounts | None = None


@dataclass(frozen=True)
class SplitRequest:
    """What running a case too long for one runner gave instead of a verdict: run it in Jacobian
    chunks over the cluster (see :mod:`distcheck.runner.split`), for ``reason``. Never a record."""

    reason: str
    seconds: float
    fingerprint: str | None
    estimate: Estimate


def fingerprint_mismatch(case: CaseId, expected: str, got: str) -> str:
    return (
        f"{case}: the inputs rebuilt from the case id have fingerprint {got}, the driver enumerated {expected}: "
        "the worker would check other numbers (a different torch version on the node, or a sample "
        "function that is not deterministic); not run"
    )


def build_checked(suite: Suite, case: CaseId, expected: str | None) -> tuple[BuiltCase | None, Outcome | None]:
    """The rebuilt case, or the outcome that says why it cannot run."""
    try:
        built = suite.build(case)
    except Exception as e:
        return None, Outcome(ERROR, f"rebuilding the case failed: {raised(e)}", traceback=traceback_of(e))
    if expected is not None and built.fingerprint != expected:
        return None, Outcome(ERROR, fingerprint_mismatch(case, expected, built.fingerprint), 0.0, built.fingerprint)
    return built, None


def run_case(
    suite: Suite,
    case: CaseId,
    expected: str | None,
    budget: Budget,
    executor: Executor | None = None,
    vectorize: bool = True,
) -> Outcome | SplitRequest:
    """Rebuild, verify, estimate and check one case on one intra-op thread, with distcheck's
    checks on ``executor`` (the serial executor unless given: a split case's coordinator passes
    its own); ``vectorize``: the checks' ``vectorize=`` (the run's)."""
    hook = probe.hook()
    if hook is None:
        return _run(suite, case, expected, budget, executor, vectorize)
    with hook.piece("case" if executor is None else "split case", str(case)) as piece:
        return _run(suite, case, expected, budget, executor, vectorize, piece)


def _run(suite: Suite, case: CaseId, expected: str | None, budget: Budget, executor, vectorize: bool, piece=None):
    start = time.perf_counter()
    with get_engine(suite.engine).threads(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ops' deprecation warnings, from every worker: noise
        built, refused = build_checked(suite, case, expected)
        if refused is not None:
            return refused
        if piece is not None:
            piece.inputs_of(built.inputs)
        estimated = None
        if has_slow_calls(built):
            try:
                estimated = estimate(built)
            except Exception:  # the function itself fails: the check reports it
                estimated = None
        if estimated is not None:
            decision, reason = budget.on_device(getattr(suite, "device", "cpu")).decide(estimated)
            if decision == SKIP:
                return Outcome(SKIPPED, reason, time.perf_counter() - start, built.fingerprint, estimated)
            if decision == SPLIT:
                return SplitRequest(reason, time.perf_counter() - start, built.fingerprint, estimated)
        if executor is None:
            executor = SerialExecutor(block_bytes=budget.block_budget)  # no Jacobians joined over the budget
        counts = BatchCounts()
        verdict, message, blocks, traceback = judged(built, distcheck_checker(executor, vectorize, counts))
        try:
            kept = None if blocks is None else bounded(blocks)
        except Exception:  # the blocks are an aid to the verdict: never lose the verdict for them
            kept = None
        seconds = time.perf_counter() - start
        return Outcome(verdict, message, seconds, built.fingerprint, estimated, kept, traceback, counts or None)


def to_record(info: CaseInfo, outcome: Outcome, tasks: int, keep_blocks: bool = False) -> CaseRecord:
    """The record of a case from its outcome, its fingerprint compared with the listed one.
    ``keep_blocks``: the record names the file of the outcome's failure blocks, if it has some
    (whoever makes the record sends them to the run's :class:`~distcheck.storage.blocks.BlockStore`)."""
    if type(outcome) is not Outcome:
        raise TypeError(f"a case's record is made of its Outcome, not of a {type(outcome).__name__}")
    if outcome.fingerprint is not None and info.fingerprint is not None and outcome.fingerprint != info.fingerprint:
        return CaseRecord(
            info.id, ERROR, fingerprint_mismatch(info.id, info.fingerprint, outcome.fingerprint), outcome.seconds, tasks
        )
    estimated = None if outcome.estimate is None else outcome.estimate.to_json()
    blocks = file_name(info.key) if keep_blocks and outcome.blocks is not None else None
    counts = None if outcome.counts is None else outcome.counts.to_json()
    return CaseRecord(
        info.id,
        outcome.verdict,
        outcome.message,
        outcome.seconds,
        tasks,
        estimated,
        blocks,
        traceback=outcome.traceback,
        batch_counts=counts,
    )


def recorded(info: CaseInfo, outcome: Outcome, tasks: int, keep_blocks: bool) -> tuple[CaseRecord, dict[str, bytes]]:
    """:func:`to_record`, and the failure blocks the record names, as their file's bytes (file
    name: bytes), encoded here, where the case ran: the driver only writes them."""
    data = None
    if keep_blocks and outcome.blocks is not None:
        try:
            data = encoded(outcome.blocks)
        except Exception:  # the blocks are an aid to the verdict: never lose the record for them
            data = None
    record = to_record(info, outcome, tasks, data is not None)
    return record, {} if record.blocks is None else {record.blocks: data}


def timeout_record(info: CaseInfo, timeout: float | None, seconds: float) -> CaseRecord:
    return CaseRecord(info.id, TIMEOUT, f"stopped after {timeout:g} s (--timeout)", seconds, 1)
