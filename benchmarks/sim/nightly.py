"""The whole slow nightly (all four check kinds) estimated from the slow ``grad`` suite's report,
when no report of the whole nightly exists. An **estimate**: each recorded grad case is scaled
per check kind by the cost formulas of ``distcheck/case/budget.py``, assuming a backward
pass costs an evaluation (e), for a case of c input and r output elements:

- grad: 2c·e (central differences) + 2r·e (two backward passes per output element) = 2e(c + r);
- gradgrad: gradcheck of (inputs, grad-outputs) → grads: c + r columns, c rows, an evaluation
  and a backward pass both 2e: 4e(c + r) + 4e·c = 4e(2c + r), i.e. ``2(2c + r)/(c + r)`` × grad;
- fwgrad (forward AD only): 2c·e + c JVPs of 2e = 4e·c, i.e. ``2c/(c + r)`` × grad;
- fwgrad_bwgrad (gradgrad with forward over reverse): 4e(c + r) + (c + r) JVPs of 4e = 8e(c + r),
  i.e. 4 × grad.

A case without a recorded estimate (an op forced to fast mode) takes the ratios of c = r (3, 1
and 4). Every op is assumed to run every check kind (PyTorch skips forward AD for ops without
it): an overestimate. As on a Ray cluster (``case/budget.py``): a scaled case above the split
threshold with more than one column splits whatever its Jacobians' size (compared block by block
on the workers), and so does a shorter one that checked in one process would exceed the block
budget (``distcheck.plan.comparisons.serial_bytes``), unless they
exceed the cluster's memory (``cluster_bytes``): then it is skipped, as the budget skips it; the
others run whole."""

from __future__ import annotations

import math

from benchmarks.sim.workload import Case, Group, Workload
from distcheck.plan.comparisons import serial_bytes
from distcheck.suites.replay import Recorded, Recording

KINDS = ("grad", "gradgrad", "fwgrad", "fwgrad_bwgrad")


def ratios(columns: int, rows: int) -> dict[str, float]:
    """Each check kind's seconds per second of ``grad``, for a case of that size."""
    c, r = (columns, rows) if columns + rows else (1, 1)
    return {"grad": 1.0, "gradgrad": 2 * (2 * c + r) / (c + r), "fwgrad": 2 * c / (c + r), "fwgrad_bwgrad": 4.0}


def _sizes(case: Recorded, kind: str) -> tuple[int, int]:
    """Jacobian columns and rows of ``kind``'s check of the case."""
    c, r = case.columns, case.rows
    return (c + r, c) if kind in ("gradgrad", "fwgrad_bwgrad") else (c, r)


def _case(recorded: Recorded, kind: str, split_seconds: float, block_bytes: float) -> Case:
    seconds = recorded.work * ratios(recorded.columns, recorded.rows)[kind]
    itemsize = recorded.bytes // (2 * recorded.columns * recorded.rows) if recorded.columns * recorded.rows else 8
    columns, rows = _sizes(recorded, kind)
    size = 2 * columns * rows * itemsize
    return Case(seconds, (seconds > split_seconds or serial_bytes(size) > block_bytes) and columns > 1, columns, size)


def nightly(
    recording: Recording, split_seconds: float = 4.0, cluster_bytes: float = math.inf, block_bytes: float = math.inf
) -> Workload:
    """The four check kinds of every op, from the slow grad suite's recording, on a cluster of
    ``cluster_bytes`` of memory; a case whose Jacobians exceed ``block_bytes`` splits too."""
    groups, over = [], 0
    for (op, dtype), recorded in recording.by_group.items():
        grads = [r for r in recorded if r.ran and r.id.check == "grad"]
        cases = [_case(r, kind, split_seconds, block_bytes) for kind in KINDS for r in grads]
        over += sum(c.bytes > cluster_bytes for c in cases)
        cases = [c for c in cases if c.bytes <= cluster_bytes]
        if cases:
            groups.append(Group(f"{op}::{dtype}", tuple(cases)))
    decided = 4 * sum(not r.ran for r in recording.cases) + over
    return Workload("slow", tuple(groups), decided)
