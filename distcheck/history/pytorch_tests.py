"""A table of torch-opinfo cases as a table of PyTorch tests (``--junit-names pytorch``): a
test's verdict on a night is its cases' verdicts aggregated as its JUnit outcome is
(:func:`distcheck.reports.pytorch_junit.aggregate`), but for flaky cases: a test whose cases
only failed as flaky ones is flaky that night. Its seconds are its cases' sum."""

from __future__ import annotations

import numpy as np

from distcheck.history.night_run import ABSENT, CODES, VERDICT_NAMES, suite_of
from distcheck.history.table import Table
from distcheck.kinds import Verdict
from distcheck.reports.pytorch_junit import aggregate
from distcheck.suites.base import CaseId, UsageError
from distcheck.suites.torch_opinfo.pytorch_names import pytorch_test_of

SUITE = "torch-opinfo"


def _outcome(verdicts: set[str]) -> str:
    """The test's verdict of a night from the set of its cases' verdicts."""
    if Verdict.FLAKY not in verdicts:
        return aggregate(verdicts)
    steady = aggregate((verdicts - {Verdict.FLAKY}) | {Verdict.PASS})
    return Verdict.FLAKY if steady == Verdict.PASS else steady


def _outcomes() -> np.ndarray:
    """The test's verdict code for each set of case verdicts, the set as a bit mask (bit k: the
    verdict of code k + 1)."""
    table = np.full(1 << len(VERDICT_NAMES), ABSENT, dtype=np.uint8)
    for mask in range(1, len(table)):
        present = {name for k, name in enumerate(VERDICT_NAMES) if mask >> k & 1}
        table[mask] = CODES[_outcome(present)]
    return table


def by_pytorch_test(table: Table) -> Table:
    """``table`` with a column per PyTorch test (named ``TestBwdGradientsCPU.test_fn_grad_sinh_cpu_float64``)."""
    others = sorted({suite_of(case) for case in table.ids} - {SUITE})
    if others:
        raise UsageError(
            f"--junit-names pytorch names the tests of {SUITE}; the history has cases of {', '.join(others)} "
            f"(choose --suite {SUITE})"
        )
    if not table.ids:
        return table
    names = [str(pytorch_test_of(CaseId.parse(case))) for case in table.ids]
    tests = sorted(set(names))
    position = {test: k for k, test in enumerate(tests)}
    group = np.fromiter((position[n] for n in names), dtype=np.int64, count=len(names))
    order = np.argsort(group, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(group[order]) != 0])
    codes = table.verdicts[:, order].astype(np.uint16)
    bits = np.where(codes == ABSENT, 0, 1 << np.maximum(codes, 1) - 1).astype(np.uint16)
    masks = np.bitwise_or.reduceat(bits, starts, axis=1)
    verdicts = _outcomes()[masks]
    seconds = np.add.reduceat(table.seconds[:, order], starts, axis=1)
    current = np.maximum.reduceat(table.current[order], starts)
    suites = [SUITE] * len(tests)
    return Table(table.mode, table.nights, table.runs, tests, suites, verdicts, seconds, current, table.superseded)
