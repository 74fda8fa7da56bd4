"""The cost model: chunks of a target duration, small units grouped into one task."""

from __future__ import annotations

import pytest
import torch

from distcheck.check import plan_check
from distcheck.executors.serial import SerialExecutor
from distcheck.options import CheckOptions
from distcheck.plan.builder import Costs
from distcheck.plan.chunking import Workload
from distcheck.plan.cost_model import CostModel, unit_seconds
from distcheck.plan.units import AnalyticalRows, AuxiliaryCheck, NumericalColumns


def _sizes(ranges):
    assert ranges[0][0] == 0 and all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))  # contiguous, in order
    return [stop - start for start, stop in ranges]


def test_a_small_workload_stays_whole():
    model = CostModel(workers=8)
    assert model.chunks(Workload(100, 1e-4)) == [(0, 100)]  # 10 ms of work
    assert model.chunks(Workload(100, None)) == [(0, 100)]  # not measured
    assert model.chunks(Workload(1, 60.0)) == [(0, 1)]  # a single item cannot be cut
    assert model.chunks(Workload(0, 1.0)) == [(0, 0)]


def test_a_large_workload_gives_each_worker_pieces_that_shrink_round_by_round():
    sizes = _sizes(CostModel(workers=4, tasks_per_worker=2).chunks(Workload(1200, 4e-3)))  # 4.8 s
    assert sizes == [200] * 4 + [100] * 4  # one piece per worker per round, the last round half as long
    sizes = _sizes(CostModel(workers=2, tasks_per_worker=3).chunks(Workload(1200, 4e-3)))
    assert sizes == [300, 300, 200, 200, 100, 100]


def test_pieces_are_equal_when_shrinking_them_would_make_them_too_short_or_many():
    model = CostModel(workers=2, tasks_per_worker=2, min_task=0.1)
    assert _sizes(model.chunks(Workload(500, 1e-3))) == [125] * 4  # 0.5 s: a last round of 83 ms would be too short
    assert _sizes(model.chunks(Workload(1000, 0.1))) == [100] * 10  # 100 s: max_task sets the pieces


def test_pieces_are_never_shorter_than_min_task_and_come_in_multiples_of_the_workers():
    model = CostModel(workers=2, min_task=0.1, tasks_per_worker=2)
    assert model.pieces(0.15) == 1  # two pieces would be shorter than min_task
    assert model.pieces(0.25) == 2
    assert model.pieces(0.35) == 2  # not 3: an odd piece would leave a worker idle at the end
    assert model.pieces(100.0) == 10  # max_task: no piece longer than 10 s
    assert CostModel(workers=64, min_task=0.1).pieces(1.0) == 10  # fewer workers busy, none starved


@pytest.mark.parametrize("workers", [1, 2, 3, 16])
@pytest.mark.parametrize("cluster", [0, 64])
def test_chunks_cover_every_item_once(workers, cluster):
    for items in (1, 2, 7, 100, 12_345):
        for per_item in (1e-6, 1e-3, 1.0):
            ranges = CostModel(workers=workers, cluster=cluster).chunks(Workload(items, per_item))
            assert sum(_sizes(ranges)) == items


def test_a_share_of_a_larger_cluster_is_cut_in_more_shrinking_rounds():
    """A split case cut for 8 of 64 workers: 7 rounds (7:6:...:1), 56 pieces instead of the
    whole cluster's 128, and its last round no longer than the whole cluster's last pieces."""
    assert CostModel(workers=64).rounds() == CostModel(workers=64, cluster=64).rounds() == 2
    assert CostModel(workers=8, cluster=64).rounds() == 7
    work = Workload(22_400, 1e-3)  # 22.4 s
    share = _sizes(CostModel(workers=8, cluster=64).chunks(work))
    assert share == [size for size in range(700, 0, -100) for _ in range(8)]
    whole = _sizes(CostModel(workers=64).chunks(work))
    assert len(whole) == 128 and share[-1] <= min(whole)


@pytest.mark.parametrize(("workers", "cluster"), [(1, 2), (2, 64), (16, 64), (8, 256), (32, 1024)])
def test_a_share_s_last_pieces_are_never_longer_than_the_whole_cluster_s(workers, cluster):
    work = Workload(10_000_000, 1e-4)  # 1000 s: no piece near min_task
    share = _sizes(CostModel(workers=workers, cluster=cluster, max_task=1e9).chunks(work))
    whole = _sizes(CostModel(workers=cluster, max_task=1e9).chunks(work))
    assert share[-1] <= min(whole) + 1 and len(share) < len(whole)


def test_unit_estimates():
    costs = Costs(evaluation=0.01, backward=0.1)
    real = NumericalColumns("f", 0, 0, 10, 1e-6, (10,), False, ())
    complex_ = NumericalColumns("f", 0, 0, 10, 1e-6, (10,), True, ())
    assert unit_seconds(real, costs) == pytest.approx(0.2)  # 2 evaluations per column
    assert unit_seconds(complex_, costs) == pytest.approx(0.4)  # 4 for a complex input
    assert unit_seconds(AnalyticalRows("f", 0, 0, 5, ()), costs) == pytest.approx(1.0)  # every row twice
    assert unit_seconds(AuxiliaryCheck("f", "zero_grad_output"), costs) == pytest.approx(0.11)


def test_small_units_share_a_task_and_long_tasks_come_first():
    costs = Costs(evaluation=1e-3, backward=1e-3)
    aux = AuxiliaryCheck("f", "zero_grad_output")
    long = NumericalColumns("f", 0, 0, 100, 1e-6, (100,), False, ())  # 0.2 s
    model = CostModel(min_task=0.1)
    assert model.tasks([aux, aux, aux], costs) == [[0, 1, 2]]
    assert model.tasks([aux, long, aux, aux], costs) == [[1], [2, 3], [0]]
    assert model.tasks([aux, long], None) == [[0], [1]]  # no costs: one unit per task


class CostModelSerial(SerialExecutor):
    policy = CostModel(workers=2)


def test_a_small_check_plans_one_unit_per_kind_and_one_task():
    _, plan = plan_check(
        torch.sin, (torch.randn(3, dtype=torch.float64).requires_grad_(),), CheckOptions(), CostModelSerial()
    )
    assert plan.subject.costs is not None  # the planner measured them for the cost model
    assert [type(u) for u in plan.units] == [NumericalColumns, AnalyticalRows, AuxiliaryCheck, AuxiliaryCheck]
    assert CostModelSerial.policy.tasks(plan.units, plan.subject.costs) == [[0, 1, 2, 3]]
