"""The runner's durability: reruns that name flaky cases, a run stopped early (incomplete), a
resumed run that skips what is recorded."""

from __future__ import annotations

import threading

import pytest

from distcheck.records.case_record import RecordBatch
from distcheck.records.listener import Listener
from distcheck.runner import RunOptions, run_suite
from distcheck.runner.protocols import Interrupted
from distcheck.suites import Selection, UsageError
from tests.runner.fake_suite import FakeSuite

GRAD = Selection(checks=("grad",))


def _verdicts(result):
    return {r.case.op: r.verdict for r in result.records}


def test_a_case_that_passes_on_a_rerun_is_flaky(tmp_path):
    suite = FakeSuite(ops=("sin", "flaky", "wrong"), marker=str(tmp_path / "m"))
    result = run_suite(suite, GRAD, RunOptions(serial=True, reruns=2))
    assert _verdicts(result) == {"sin": "pass", "flaky": "flaky", "wrong": "fail"}
    sin, flaky, wrong = result.records
    assert sin.attempts is None
    assert [a["verdict"] for a in flaky.attempts] == ["fail", "pass"]
    assert flaky.message.startswith("passed on rerun 1 of 2; the first run said fail: ")
    assert [a["verdict"] for a in wrong.attempts] == ["fail", "fail", "fail"]
    assert not result.failed or wrong.verdict == "fail"
    assert [r.id for r in result.flaky] == [flaky.id]


def test_without_reruns_nothing_is_flaky(tmp_path):
    suite = FakeSuite(ops=("flaky",), marker=str(tmp_path / "m"))
    (record,) = run_suite(suite, GRAD, RunOptions(serial=True)).records
    assert record.verdict == "fail" and record.attempts is None


class _StopAfter(Listener):
    def __init__(self, stop: threading.Event, cases: int):
        self.stop, self.cases, self.seen = stop, cases, 0

    def recorded(self, batch: RecordBatch) -> None:
        self.seen += len(batch)
        if self.seen >= self.cases:
            self.stop.set()


def test_a_stopped_run_is_incomplete_and_resumes():
    suite, stop = FakeSuite(ops=("sin",), samples=5), threading.Event()
    partial = run_suite(suite, GRAD, RunOptions(serial=True), _StopAfter(stop, 2), stop=stop)
    assert not partial.complete and len(partial.records) == 2
    rest = run_suite(suite, GRAD, RunOptions(serial=True), recorded=partial.records)
    assert rest.complete and [r.case.sample for r in rest.records] == [0, 1, 2, 3, 4]
    assert rest.records[:2] == partial.records  # taken as recorded, not run again


class _InterruptIn(Listener):
    """Raises Interrupted as a signal handler would, while the run is going."""

    def recorded(self, batch: RecordBatch) -> None:
        raise Interrupted


def test_an_interrupted_serial_case_stops_the_run():
    result = run_suite(FakeSuite(ops=("sin",), samples=3), GRAD, RunOptions(serial=True), _InterruptIn())
    assert not result.complete and len(result.records) == 1


def test_reruns_stop_too(tmp_path):
    suite, stop = FakeSuite(ops=("wrong", "sin", "tan")), threading.Event()
    result = run_suite(suite, GRAD, RunOptions(serial=True, reruns=3), _StopAfter(stop, 2), stop=stop)
    assert not result.complete and [r.case.op for r in result.records] == ["sin", "tan"]  # wrong: held, unsettled


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"reruns": -1}, "RunOptions.reruns must not be negative"),
        ({"timeout": -5.0}, "RunOptions.timeout must not be negative"),
        ({"serial": True, "address": "auto"}, "serial=True runs in this process"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(UsageError, match=message):
        RunOptions(**options)


@pytest.mark.ray
def test_reruns_on_ray_run_in_fresh_workers(ray_cluster, tmp_path):
    """``flakypid`` passes only in a process other than its first one."""
    suite = FakeSuite(ops=("flakypid", "sin"), samples=2, marker=str(tmp_path / "m"))
    result = run_suite(suite, GRAD, RunOptions(reruns=1, timeout=60))
    assert [r.verdict for r in result.records] == ["flaky", "flaky", "pass", "pass"]


@pytest.mark.ray
def test_a_stopped_ray_run_cancels_its_tasks(ray_cluster, monkeypatch):
    import time

    nap = 120.0
    monkeypatch.setenv("FAKE_NAP", str(nap))
    stop = threading.Event()
    threading.Timer(3.0, stop.set).start()
    start = time.perf_counter()
    result = run_suite(FakeSuite(ops=("nap", "nap2")), GRAD, RunOptions(timeout=600), stop=stop)
    # the run returned without waiting for its tasks' naps to end
    assert time.perf_counter() - start < nap and not result.complete and result.records == []
