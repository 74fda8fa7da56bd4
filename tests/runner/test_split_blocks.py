"""Split cases of the slow grad suite with a tiny block budget: every Jacobian comparison of
their coordinators runs block by block on the workers, and the records are those of whole
Jacobians compared in one process."""

from __future__ import annotations

import pytest

from distcheck.runner import RunOptions, run_suite
from distcheck.suites import Selection, get_suite

pytestmark = pytest.mark.ray

# small op_db cases, real and complex, split by a split threshold of 0 s (with no block budget,
# every Jacobian column is a unit of its own, and a block job: a few small cases are plenty)
SELECTION = Selection(checks=("grad",), ops=("cumsum",), substring="::sample0::")


@pytest.mark.slow
def test_split_cases_compared_block_by_block_give_the_whole_jacobian_records(ray_cluster):
    suite = get_suite("torch-opinfo", "slow")
    whole = run_suite(suite, SELECTION, RunOptions(serial=True)).records
    split_whole = run_suite(suite, SELECTION, RunOptions(split_seconds=0.0, block_mb=float("inf"))).records
    split_blocks = run_suite(suite, SELECTION, RunOptions(split_seconds=0.0, block_mb=0)).records
    assert {r.case.dtype for r in whole} == {"float64", "complex128"}
    expected = [(str(r.id), r.verdict, r.message) for r in whole]
    assert [(str(r.id), r.verdict, r.message) for r in split_blocks] == expected
    assert [(str(r.id), r.verdict, r.message) for r in split_whole] == expected
    # with no block budget, the split cases' comparisons ran as block jobs (counted as their tasks)
    assert all(b.tasks > w.tasks for b, w in zip(split_blocks, split_whole)), [
        (str(b.id), w.tasks, b.tasks) for b, w in zip(split_blocks, split_whole)
    ]
