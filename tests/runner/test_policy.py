"""The scheduling seam: policies by name, by ``MODULE:CLASS`` and by entry point; an outside
policy (last in, first out: ``tests/runner/lifo_policy.py``) ordering a queue and a Ray run."""

from __future__ import annotations

import importlib.metadata

import pytest

from distcheck.runner import RunOptions, run_suite
from distcheck.runner.default_policy import DefaultPolicy
from distcheck.runner.options import RunConfig
from distcheck.runner.policy import PolicyLoadError, load_policy
from distcheck.runner.work_queue import WAIT, WorkQueue
from distcheck.suites import CaseId, CaseInfo, GroupInfo, Selection
from tests.runner import lifo_policy
from tests.runner.fake_suite import FakeSuite
from tests.runner.lifo_policy import LifoPolicy

LIFO = "tests.runner.lifo_policy:LifoPolicy"


def _case(op: str, sample: int) -> CaseInfo:
    return CaseInfo(CaseId("s", op, "float64", "grad", sample), fingerprint="fp")


def _group(op: str) -> GroupInfo:
    return GroupInfo("s", op, "float64", ("grad",))


def test_policies_by_name_by_module_and_by_entry_point(monkeypatch):
    assert load_policy("default") is DefaultPolicy
    assert load_policy(LIFO) is LifoPolicy
    installed = importlib.metadata.EntryPoint("lifo", LIFO, "distcheck.policies")
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [installed] if group else [])
    assert load_policy("lifo") is LifoPolicy


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nope", "unknown policy 'nope' (known: default; or MODULE:CLASS)"),
        (
            "tests.runner.nowhere:Lifo",
            "policy 'tests.runner.nowhere:Lifo' (tests.runner.nowhere:Lifo) failed to load: ",
        ),
        ("tests.runner.lifo_policy:Nothing", "AttributeError: module 'tests.runner.lifo_policy' has no attribute"),
        ("tests.runner.lifo_policy:LOG", "is a str, not a class or factory"),
    ],
)
def test_a_policy_that_is_not_there_is_one_line(spec, message):
    with pytest.raises(PolicyLoadError) as error:
        load_policy(spec)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_an_outside_policy_orders_the_queue():
    queue = WorkQueue(LifoPolicy(RunConfig(RunOptions(), FakeSuite(), Selection())))
    queue.put([_group("g"), _group("h"), _case("a", 0)])
    group = queue.take(0)
    assert group.cases.keys == ("s::a::float64::sample0::grad",)
    assert queue.take(0).group.op == "h" and group.id != queue.take(0).id
    queue.resubmit([([_case("z", 0)], True)])
    resubmitted = queue.take(1)
    assert resubmitted.careful and queue.take(1) == WAIT
    queue.put([_case("b", 0)])
    queue.close()
    assert queue.take(1).cases.keys == ("s::b::float64::sample0::grad",)
    assert not queue.idle()  # held by runners 0 and 1
    assert len(queue.lost(1, None)) == 2 and queue.lost(0, None) and queue.idle()


def test_an_unknown_policy_stops_a_run_before_anything_runs():
    with pytest.raises(PolicyLoadError, match="unknown policy 'fifo'"):
        run_suite(FakeSuite(ops=("sin",)), Selection(checks=("grad",)), RunOptions(policy="fifo"))


@pytest.mark.ray
def test_an_outside_policy_orders_a_ray_run_and_keeps_its_verdicts(ray_cluster, tmp_path, monkeypatch):
    """The policy is made on the driver and runs in the queue's actor: every item it handed out
    was the last one put (its log, replayed on a stack, says so), groups are listed whole, and
    the verdicts are those of the default policy."""
    log = tmp_path / "lifo.log"
    monkeypatch.setenv(lifo_policy.LOG, str(log))
    suite = FakeSuite(ops=("sin", "wrong", "crash", "skipped", "xfail", "big"), samples=3)
    selection = Selection(checks=("grad", "gradgrad"))
    lifo = run_suite(suite, selection, RunOptions(timeout=60, policy=LIFO))
    default = run_suite(suite, selection, RunOptions(timeout=60))
    assert [(r.id, r.verdict) for r in lifo.records] == [(r.id, r.verdict) for r in default.records]
    stack, taken = [], []
    for line in log.read_text().splitlines():
        what, name = line.split(" ", 1)
        if what == "put":
            stack.append(name)
        else:
            assert stack.pop() == name
            taken.append(name)
    groups = [str(g) for g in suite.groups(selection) if isinstance(g, GroupInfo)]
    assert sorted(taken) == sorted(groups) and not stack  # each group listed and run whole
