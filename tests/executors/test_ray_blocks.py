"""Block jobs on Ray: with a tiny block budget, the verdicts and messages of comparing whole
Jacobians, the comparisons made by tasks on the workers."""

from __future__ import annotations

import math

import pytest
import torch

import distcheck
from distcheck.executors.ray_executor import RayExecutor, RayTasks
from distcheck.executors.serial import SerialExecutor
from distcheck.plan.chunking import Workload
from distcheck.plan.cost_model import CostModel, unit_bytes
from tests.parity.cases import ALL
from tests.parity.runner import run
from tests.reduce.test_blockwise import Pieces, Scaled

NAMES = {"sin", "complex_sin", "gg_matmul", "wrong_scale", "one_wrong_element", "transposed", "missing_conjugate"}
SAMPLE = [c for c in ALL if c.name in NAMES | {"wrong_second_output", "real_to_complex"}]


class Recorded(RayTasks):
    """Ray tasks that keep the units of each task they start."""

    def launch(self, box, units, groups, block_bytes):
        self.units = [[units[k] for k in members] for members in groups]
        return super().launch(box, units, groups, block_bytes)


class Counted(RayExecutor):
    """A Ray executor that counts the block jobs it ran, and keeps the tasks' units."""

    def __init__(self, **options):
        super().__init__(tasks=Recorded(), **options)

    def submit(self, subject, units):
        results = super().submit(subject, units)
        self.blocks = results.blocks
        return results

    @property
    def tasks_units(self):
        return self.tasks.units


@pytest.fixture(scope="module")
def pair(ray_cluster):
    """The same chunks judged whole and block by block."""
    return RayExecutor(policy=Pieces(2)), Counted(policy=Pieces(2), block_bytes=0)


@pytest.mark.filterwarnings("ignore:Input #0 requires gradient and is not a double")
@pytest.mark.parametrize("case", SAMPLE, ids=str)
def test_parity_cases_give_the_whole_jacobian_messages(case, pair):
    whole, blockwise = pair
    expected, got = run(case, "distcheck", executor=whole), run(case, "distcheck", executor=blockwise)
    assert (got.verdict, got.message) == (expected.verdict, expected.message)


def test_a_large_failing_check_on_the_cost_model(ray_cluster):
    """The cost model keeps every unit under half the budget; the jobs run as tasks (of the
    element-by-element path: a batched comparison that fails is judged again by it, in tasks
    of its own)."""
    n = 300
    x = torch.randn(n, dtype=torch.float64, generator=torch.Generator().manual_seed(0)).requires_grad_()
    w = torch.linspace(-2, 2, n, dtype=torch.float64)
    wrong = torch.where(torch.arange(n) % 7 == 3, 0.5, 0.0).double()
    executor = Counted(block_bytes=64 * 2**10)
    messages = []
    for chosen in (SerialExecutor(), executor):
        with pytest.raises(distcheck.GradcheckError) as raised:
            distcheck.gradcheck(Scaled.apply, (x, w, wrong), executor=chosen, vectorize=False)
        messages.append(str(raised.value))
    assert messages[0] == messages[1]
    assert executor.blocks.tasks >= 2 * math.ceil(n * n * 8 / (32 * 2**10))  # a job per column unit, twice
    # no task holds more than half the budget: the cost model's groups, with the executor's budget
    assert all(sum(unit_bytes(u) for u in units) <= 32 * 2**10 for units in executor.tasks_units)
    assert max(len(units) for units in executor.tasks_units) > 1  # small units still share tasks


def test_the_cost_model_caps_a_unit_at_half_the_budget():
    model = CostModel(workers=2, block_bytes=1000)
    ranges = model.chunks(Workload(100, 0.001, bytes_per_item=80))
    assert max(stop - start for start, stop in ranges) * 80 <= 500
    assert ranges[0][0] == 0 and ranges[-1][1] == 100
    assert CostModel(workers=2).chunks(Workload(100, 0.001, 80)) == CostModel(workers=2).timed_chunks(
        Workload(100, 0.001)
    )


def test_a_block_job_starts_only_once_the_results_it_compares_are_made(ray_cluster, monkeypatch):
    """A job that waited for its results inside its task would give its CPU back to Ray, which
    starts a new, cold worker process for the next task in the queue."""
    import time
    from types import SimpleNamespace

    from distcheck.executors import ray_blocks

    @ray_cluster.remote(num_cpus=0)
    def made(seconds: float, value: int) -> list[int]:
        time.sleep(seconds)
        return [value]

    results = [made.remote(0.3 * k, k) for k in range(4)]  # made 0, 0.3, 0.6, 0.9 s from now
    started = []

    class Recorded:
        def remote(self, pieces, job):
            (where,) = pieces
            refs = [ref for ref, _ in where.values()]
            ready, _ = ray_cluster.wait(refs, num_returns=len(refs), timeout=0, fetch_local=False)
            started.append(len(ready) == len(refs))
            return ray_cluster.put(job.name)

    monkeypatch.setattr(ray_blocks, "_run_job", Recorded())
    jobs = [SimpleNamespace(name=k, numerical=k, analytical=(3 - k,)) for k in range(4)]
    outcomes = ray_blocks.RayBlocks(lambda unit: (results[unit], 0), budget=0).run(jobs)
    assert outcomes == [0, 1, 2, 3] and started == [True] * 4
