"""Split cases of the slow grad suite with a tiny block budget: every Jacobian comparison of
their coordinators runs block by block on the workers, and the records are those of whole
Jacobians compared in one process."""

from __future__ import annotations

from dataclasses import replace

import pytest

import distcheck.runner.runner as runner_module
from distcheck.runner import RunOptions, run_suite
from distcheck.suites import Selection, get_suite

pytestmark = pytest.mark.ray

# small op_db cases, real and complex, split by a split threshold of 0 s (with no block budget,
# every Jacobian column is a unit of its own, and a block job: a few small cases are plenty)
SELECTION = Selection(checks=("grad",), ops=("cumsum",), substring="::sample0::")


def _block_budget(monkeypatch, block_bytes: float) -> None:
    """Runs made from now on give their split cases' coordinators this block budget."""
    made = runner_module.make_dispatcher

    def dispatcher(*args):
        made_one = made(*args)
        made_one.split_budget = replace(made_one.split_budget, block_bytes=block_bytes)
        return made_one

    monkeypatch.setattr(runner_module, "make_dispatcher", dispatcher)


def test_split_cases_compared_block_by_block_give_the_whole_jacobian_records(ray_cluster, monkeypatch):
    suite = get_suite("torch-opinfo", "slow")
    whole = run_suite(suite, SELECTION, RunOptions(serial=True)).records
    _block_budget(monkeypatch, float("inf"))
    split_whole = run_suite(suite, SELECTION, RunOptions(split_seconds=0.0)).records
    _block_budget(monkeypatch, 0)
    split_blocks = run_suite(suite, SELECTION, RunOptions(split_seconds=0.0)).records
    assert {r.case.dtype for r in whole} == {"float64", "complex128"}
    expected = [(str(r.id), r.verdict, r.message) for r in whole]
    assert [(str(r.id), r.verdict, r.message) for r in split_blocks] == expected
    assert [(str(r.id), r.verdict, r.message) for r in split_whole] == expected
    # with no block budget, the split cases' comparisons ran as block jobs (counted as their tasks)
    assert all(b.tasks > w.tasks for b, w in zip(split_blocks, split_whole)), [
        (str(b.id), w.tasks, b.tasks) for b, w in zip(split_blocks, split_whole)
    ]
