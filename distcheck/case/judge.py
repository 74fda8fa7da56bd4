"""The verdict of a built case: run its calls with a checker (distcheck's, or a reference's).
``pass``: every call returned True (or raised the error the case expects); ``fail``: the
checker's failure or False (or no expected error); ``error``: anything else raised, with its
bounded traceback (a CUDA out-of-memory with the device's figures). A case expected to fail is
``xfail`` where it would not pass, else ``xpass`` — or ``xfail`` if the engine's own gradcheck
(the case's reference) fails on it: the engine's own test fails there as expected.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import replace
from typing import NamedTuple

from distcheck import check
from distcheck.errors import GradcheckError
from distcheck.executors import Executor
from distcheck.gpus import is_out_of_memory, out_of_memory
from distcheck.records.case_record import ERROR, FAIL, PASS, XFAIL, XPASS
from distcheck.records.tracebacks import traceback_of
from distcheck.reduce.counts import BatchCounts
from distcheck.reduce.failure_blocks import FailureBlocks
from distcheck.suites.base import BuiltCase, CheckCall
from distcheck.suites.checkers import Checker


class Judgement(NamedTuple):
    """A case's verdict and message; ``blocks``: the Jacobian blocks of a failed comparison,
    when the failure has them; ``traceback``: an ``error``'s, bounded."""

    verdict: str
    message: str
    blocks: FailureBlocks | None = None
    traceback: str | None = None


def distcheck_checker(executor: Executor, vectorize: bool = True, counts: BatchCounts | None = None) -> Checker:
    """distcheck's checks (:mod:`distcheck.check`), running their units on ``executor``;
    ``vectorize``: the checks' ``vectorize=``; ``counts`` gets what their slow-mode Jacobian
    comparisons were decided on (their ``batch_counts=``)."""
    options = {"executor": executor, "vectorize": vectorize, "batch_counts": counts}

    def checker(**more) -> Checker:
        return Checker(
            functools.partial(check.gradcheck, **options, **more),
            functools.partial(check.gradgradcheck, **options, **more),
            (GradcheckError,),
        )

    # a case expected to fail: an error of the backward passes ends its check before the
    # numerical Jacobian (same verdict, see CheckOptions.analytical_first; a comparison made block
    # by block on the workers keeps its order)
    return replace(checker(), expecting_failure=checker(analytical_first=True))


def raised(error: BaseException) -> str:
    """What an error that is not a verdict says in a record: its type and message; for a CUDA
    out-of-memory, the device's figures first (and torch's cache freed, for the next case)."""
    if is_out_of_memory(error):
        first_line = str(error).partition("\n")[0]
        return f"{type(error).__name__}: {out_of_memory('cuda').describe()}: {first_line}"
    return f"{type(error).__name__}: {error}"


def _describe(call: CheckCall, index: int, total: int) -> str:
    if total == 1:
        return call.function
    noncontiguous = call.kwargs.get("gen_non_contig_grad_outputs")
    detail = f", gen_non_contig_grad_outputs={noncontiguous}" if noncontiguous is not None else ""
    return f"{call.function} (call {index + 1} of {total}{detail})"


def judge(case: BuiltCase, checker: Checker) -> tuple[str, str]:
    """``(verdict, message)`` of ``case`` under ``checker``. Warnings are silenced (PyTorch's
    tests do not fail on them); BaseExceptions (interrupts, timeouts) propagate."""
    verdict, message, *_ = judged(case, checker)
    return verdict, message


def judged(case: BuiltCase, checker: Checker) -> Judgement:
    """:func:`judge`, with the Jacobian blocks of a failed comparison and an error's traceback."""
    if case.expected_failure is None:
        return _judged(case, checker)
    judgement = _judged(case, checker.expecting_failure or checker)
    verdict, message, blocks, _ = judgement
    expected = f"expected to fail ({case.expected_failure})"
    if verdict != PASS:
        return Judgement(XFAIL, f"{expected}; {verdict}: {message}", blocks)
    if case.reference is not None:
        reference = case.reference()
        if reference != checker:
            verdict, message, *_ = _judged(case, reference)
            if verdict != PASS:
                return Judgement(
                    XFAIL,
                    f"{expected}; distcheck's checks pass, but the engine's own raise on this sample, "
                    f"so its test fails as expected ({verdict}): {message}",
                )
    return Judgement(XPASS, f"unexpected success: {expected}, the checks pass")


def _judged(case: BuiltCase, checker: Checker) -> Judgement:
    expected = case.expected_error
    where = ""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for index, call in enumerate(case.calls):
                where = _describe(call, index, len(case.calls))
                case.before_call()
                if call.function == "call":
                    case.func(*case.inputs, **call.kwargs)
                    continue
                check = checker.gradcheck if call.function == "gradcheck" else checker.gradgradcheck
                if not check(case.func, case.inputs, **call.kwargs):
                    return Judgement(FAIL, f"{where} returned False")
    except Exception as e:
        if expected is not None:
            if expected.matches(e):
                return Judgement(PASS, "")
            return Judgement(FAIL, f"expected {expected}; {where} raised {type(e).__name__}: {e}")
        if isinstance(e, checker.failures):
            return Judgement(FAIL, f"{where}: {e}" if len(case.calls) > 1 else str(e), getattr(e, "blocks", None))
        return Judgement(ERROR, f"{where} raised {raised(e)}", None, traceback_of(e))
    if expected is not None:
        return Judgement(FAIL, f"expected {expected}, but {'it' if where == 'call' else 'the checks'} passed")
    return Judgement(PASS, "")
