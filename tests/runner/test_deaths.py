"""Ray errors told apart, and the policy for each kind (pure: Ray's exception classes only)."""

from __future__ import annotations

import pytest
from ray import exceptions as ray_errors

from distcheck.records.case_record import FAIL, PASS, CaseRecord
from distcheck.runner.deaths import (
    CANCELLED,
    CRASHED,
    MAX_NODE_LOSSES,
    NODE_LOST,
    OTHER,
    OUT_OF_MEMORY,
    Deaths,
    WorkerDeath,
    classify,
    crash_detail,
)
from distcheck.suites.base import CaseId

OOM_MESSAGE = (
    "Task was killed due to the node running low on memory.\n"
    "Memory on the node (IP: 10.0.0.7, ID: 8f9d) where the task (task ID: 1c2e, name=_run_batch, pid=4242, "
    "memory used=5.10GB) was running was 14.90GB / 15.60GB (0.955128), which exceeds the memory usage "
    "threshold of 0.95. Ray killed this worker (ID: 77aa) because it was the most recently scheduled task"
)
NODE_MESSAGE = "Task failed because the node it was running on is dead or unavailable. Node IP: 10.0.0.8"


class _DetailedCrash(ray_errors.WorkerCrashedError):
    def __str__(self) -> str:
        return "The worker died unexpectedly: SIGSEGV"


def _task_error(cause: BaseException) -> ray_errors.RayTaskError:
    return ray_errors.RayTaskError("_run_batch", "Traceback ...", cause)


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (ray_errors.NodeDiedError("node 8f9d died"), NODE_LOST),
        (ray_errors.LocalRayletDiedError(), NODE_LOST),
        (ray_errors.WorkerCrashedError(), CRASHED),
        (ray_errors.OutOfMemoryError(OOM_MESSAGE), OUT_OF_MEMORY),
        (ray_errors.TaskCancelledError(), CANCELLED),
        (_task_error(ray_errors.OutOfMemoryError(OOM_MESSAGE)), OUT_OF_MEMORY),
        (_task_error(ray_errors.NodeDiedError("gone")), NODE_LOST),
        (ray_errors.ActorDiedError(), CRASHED),
        (ray_errors.RaySystemError(NODE_MESSAGE), NODE_LOST),  # known only by its message
        (ray_errors.RaySystemError("the GCS said no"), OTHER),
    ],
)
def test_kinds(error, kind):
    assert classify(error).kind == kind


def test_out_of_memory_message_keeps_rays_figures():
    message = classify(ray_errors.OutOfMemoryError(OOM_MESSAGE)).message
    assert message.startswith("out of memory: Ray's memory monitor killed the worker")
    assert "memory used=5.10GB" in message and "14.90GB / 15.60GB (0.955128)" in message
    assert "threshold of 0.95" in message


def test_crash_message_names_the_signal_or_exit_when_ray_gives_one():
    assert crash_detail("The worker died unexpectedly while executing this task.") == ""  # Ray 2.60's: no detail
    assert crash_detail("Worker exits with an exit code 3.") == "exit code 3"
    assert crash_detail("killed by SIGSEGV") == "signal SIGSEGV"
    message = classify(_DetailedCrash()).message
    assert message.startswith("the worker running this case crashed (signal SIGSEGV)")


def test_node_losses_retry_up_to_the_limit():
    policy, death = Deaths(), WorkerDeath(NODE_LOST, "the node running it was lost (gone)")
    for _ in range(MAX_NODE_LOSSES - 1):
        assert policy.node_lost(["a", "b"], death) == {}
    assert policy.node_lost(["b", "c"], death) == {
        "b": f"lost {MAX_NODE_LOSSES} nodes while running this case (at most {MAX_NODE_LOSSES}): the node running it "
        "was lost (gone)"
    }
    assert policy.node_lost(["a"], death).keys() == {"a"}


def test_a_crash_runs_once_more_then_says_whether_it_reproduced():
    crash = WorkerDeath(CRASHED, "the worker running this case crashed: boom")
    policy = Deaths()
    assert policy.died("a", crash) is None  # run it again alone
    again = policy.died("a", crash)
    assert again == "the worker running this case crashed: boom; run again alone, it crashed again (reproduced)"
    record = CaseRecord(CaseId("s", "b", "float64", "grad", 0), PASS, "", 0.1, 1)
    assert policy.died(record.id, crash) is None
    settled = policy.settle(record)
    assert settled.verdict == "error"
    assert settled.message == (
        "the worker running this case crashed: boom; run again alone, it did not crash (the rerun: pass)"
    )
    assert policy.settle(record) is record  # told once
    failing = CaseRecord(CaseId("s", "c", "float64", "grad", 0), FAIL, "Jacobian mismatch\nmore", 0.1, 1)
    assert policy.settle(failing) is failing


@pytest.mark.parametrize("kind", [OUT_OF_MEMORY, CANCELLED, OTHER])
def test_other_deaths_are_errors_at_once(kind):
    assert Deaths().died("a", WorkerDeath(kind, "why")) == "why"
