"""Running one case where it lands (a Ray worker, or this process): rebuild it from its id,
compare the fingerprint of its inputs with the driver's, estimate it, then check it.

Every step's failure is a verdict, never an exception: a runner must go on with the others.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

from distcheck.engines import get_engine
from distcheck.executors.serial import SerialExecutor
from distcheck.kinds import Verdict
from distcheck.runner import artifacts, memory_probe
from distcheck.runner.budget import SKIP, SPLIT, Budget, Estimate, estimate, has_slow_calls
from distcheck.runner.judge import distcheck_checker, judged, raised
from distcheck.runner.records import ERROR, SKIPPED, TIMEOUT, CaseRecord
from distcheck.suites.base import BuiltCase, CaseId, CaseInfo, Suite
from distcheck.suites.checkers import Checker


@dataclass(frozen=True)
class Outcome:
    """What running a case where it landed gave: its verdict. ``fingerprint`` is that of the
    inputs actually rebuilt (the driver checks it again); ``blocks``: the bounded Jacobian
    blocks of a failed comparison (the driver stores them, see :mod:`.artifacts`)."""

    verdict: Verdict
    message: str = ""
    seconds: float = 0.0
    fingerprint: str | None = None
    estimate: Estimate | None = None
    blocks: artifacts.CaseBlocks | None = None


@dataclass(frozen=True)
class SplitRequest:
    """What running a case too long for one task gave instead of a verdict: run it in Jacobian
    chunks over the cluster (see :mod:`.split`), for ``reason``. The driver starts it; it is
    never a record (:func:`to_record` refuses it)."""

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
        return None, Outcome(ERROR, f"rebuilding the case failed: {raised(e)}")
    if expected is not None and built.fingerprint != expected:
        return None, Outcome(ERROR, fingerprint_mismatch(case, expected, built.fingerprint), 0.0, built.fingerprint)
    return built, None


def run_case(
    suite: Suite,
    case: CaseId,
    expected: str | None,
    budget: Budget,
    checker: Checker | None = None,
) -> Outcome | SplitRequest:
    """Rebuild, verify, estimate and check one case on one intra-op thread. ``checker``:
    distcheck's checks on the serial executor unless given (a runner passes a Ray executor's
    for a case it splits)."""
    start = time.perf_counter()
    kind = "case" if checker is None else "split case"
    with memory_probe.probe(kind, str(case)) as piece, get_engine(suite.engine).threads(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ops' deprecation warnings, from every worker: noise
        built, refused = build_checked(suite, case, expected)
        if refused is not None:
            return refused
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
        serial = SerialExecutor(block_bytes=budget.block_budget)  # no Jacobians joined over the budget
        verdict, message, blocks = judged(built, checker or distcheck_checker(serial))
        try:
            kept = None if blocks is None else artifacts.bounded(blocks)
        except Exception:  # the blocks are an aid to the verdict: never lose the verdict for them
            kept = None
        return Outcome(verdict, message, time.perf_counter() - start, built.fingerprint, estimated, kept)


def to_record(info: CaseInfo, outcome: Outcome, tasks: int) -> CaseRecord:
    """The record of a case from where it ran, after the driver's own fingerprint check."""
    if type(outcome) is not Outcome:
        raise TypeError(f"a case's record is made of its Outcome, not of a {type(outcome).__name__}")
    if outcome.fingerprint is not None and info.fingerprint is not None and outcome.fingerprint != info.fingerprint:
        return CaseRecord(
            info.id, ERROR, fingerprint_mismatch(info.id, info.fingerprint, outcome.fingerprint), outcome.seconds, tasks
        )
    estimated = None if outcome.estimate is None else outcome.estimate.to_json()
    blocks = artifacts.store(str(info.id), outcome.blocks)
    return CaseRecord(info.id, outcome.verdict, outcome.message, outcome.seconds, tasks, estimated, blocks)


def timeout_record(info: CaseInfo, timeout: float | None, seconds: float, tasks: int) -> CaseRecord:
    return CaseRecord(info.id, TIMEOUT, f"stopped after {timeout:g} s (--timeout)", seconds, tasks)
