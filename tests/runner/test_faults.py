"""Faults a nightly meets, on the real command line in a process of its own: the driver killed
with SIGKILL then resumed, Ctrl-C (once: a partial report and the resume command; twice: at
once), and a node of a real two-node cluster lost in the middle of the run.

Each process is started in a session of its own, and only those sessions' processes are ever
signalled. Verdicts are compared with an undisturbed run of the same cases (in this process).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from distcheck.runner import RunOptions, run_suite
from distcheck.storage.run_folder import RECORDS
from distcheck.suites import Selection
from tests.runner.fake_cli import NapSuite

pytestmark = [pytest.mark.slow, pytest.mark.ci]
REPO = Path(__file__).resolve().parents[2]
GRAD = Selection(checks=("grad",))


@pytest.fixture(scope="module")
def undisturbed() -> dict[str, str]:
    """The verdict of every case of suite ``naps`` when nothing goes wrong."""
    os.environ["FAKE_NAP"] = "0"
    try:
        return {r.id: r.verdict for r in run_suite(NapSuite(), GRAD, RunOptions(serial=True)).records}
    finally:
        del os.environ["FAKE_NAP"]


def _distcheck(out: Path, *args: str, nap: float = 0.3) -> subprocess.Popen:
    command = [sys.executable, "-m", "tests.runner.fake_cli", "run", "--suite", "naps", "--checks", "grad"]
    env = {**os.environ, "PYTHONHASHSEED": "0", "FAKE_NAP": str(nap)}
    return subprocess.Popen(
        [*command, "--out", str(out), *args],
        cwd=REPO,
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _lines(out: Path) -> list[dict]:
    if not (out / RECORDS).exists():
        return []
    return [json.loads(line) for line in (out / RECORDS).read_text().splitlines()]


def _case_lines(out: Path) -> list[dict]:
    return [line for line in _lines(out) if line["$report_type"] == "CaseRecord"]


def _wait_for_records(out: Path, process: subprocess.Popen, count: int, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while len(_case_lines(out)) < count:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the run recorded too few cases"
        time.sleep(0.1)


def _session(sid: int) -> list[int]:
    """Processes of session ``sid`` still alive."""
    ps = subprocess.run(["ps", "-eo", "pid=,sid="], capture_output=True, text=True).stdout.split()
    return [int(pid) for pid, s in zip(ps[::2], ps[1::2]) if int(s) == sid]


def _gone(sid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _session(sid) and time.monotonic() < deadline:
        time.sleep(0.2)
    return not _session(sid)


def _kill_session(sid: int) -> None:
    for pid in _session(sid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _report(out: Path) -> dict:
    return json.loads((out / "report.json").read_text())


def _resume(out: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "tests.runner.fake_cli", "run", "--resume", str(out), *args]
    env = {**os.environ, "PYTHONHASHSEED": "0", "FAKE_NAP": "0.05"}
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def _final_verdicts(out: Path) -> dict[str, str]:
    """The report's verdicts, after checking that every case is in it, and in the stream, once."""
    cases = _report(out)["cases"]
    ids = [c["id"] for c in cases]
    streamed = [line["id"] for line in _case_lines(out)]
    assert len(ids) == len(set(ids)) and sorted(streamed) == sorted(ids)
    return {c["id"]: c["verdict"] for c in cases}


def test_driver_killed_with_sigkill_resumes_without_loss_or_duplicates(tmp_path, undisturbed):
    out = tmp_path / "run"
    driver = _distcheck(out, "--serial")
    try:
        _wait_for_records(out, driver, 4)
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
        before = {line["id"] for line in _case_lines(out)}
    finally:
        _kill_session(driver.pid)
    resumed = _resume(out)
    assert resumed.returncode == 1, resumed.stderr  # the suite's wrong case fails, as undisturbed
    assert _final_verdicts(out) == undisturbed
    kinds = [line["$report_type"] for line in _lines(out)]
    assert kinds.count("RunResume") == 1 and kinds[-1] == "RunFinish"
    assert {line["id"] for line in _case_lines(out)[: len(before)]} == before  # kept, not run again


def _stop(out: Path, driver: subprocess.Popen, records: int, signum: int) -> str:
    """Send ``signum`` once ``records`` cases are recorded; check that the driver exits with
    128 + signum within 10 s, leaving no process behind; its stderr."""
    try:
        _wait_for_records(out, driver, records)
        os.kill(driver.pid, signum)
        start = time.monotonic()
        _, err = driver.communicate(timeout=60)
        assert time.monotonic() - start < 10 and driver.returncode == 128 + signum, err
        assert _gone(driver.pid, 10), "a Ray process outlived distcheck"
    finally:
        _kill_session(driver.pid)
    return err


@pytest.mark.ray
def test_ctrl_c_stops_within_10_s_with_a_partial_report_and_leaves_no_ray_process(tmp_path, undisturbed):
    out = tmp_path / "run"
    driver = _distcheck(out)  # a local Ray of its own
    err = _stop(out, driver, 3, signal.SIGINT)
    assert f"resume with: distcheck run --resume {out}" in err
    summary = _report(out)["summary"]
    assert summary["complete"] is False and summary["interrupted"] == "SIGINT"
    assert summary["resume"] == ["distcheck", "run", "--resume", str(out)]
    assert 3 <= summary["cases"] < len(undisturbed)
    resumed = _resume(out, "--serial")
    assert resumed.returncode == 1, resumed.stderr
    assert _final_verdicts(out) == undisturbed


def test_sigterm_stops_a_serial_run_with_status_143(tmp_path):
    out = tmp_path / "run"
    _stop(out, _distcheck(out, "--serial", nap=2.0), 1, signal.SIGTERM)  # interrupted in a case of seconds
    summary = _report(out)["summary"]
    assert summary["complete"] is False and summary["interrupted"] == "SIGTERM"
    assert summary["cases"] == len(_case_lines(out)) >= 1


@pytest.mark.ray
def test_a_second_signal_exits_at_once_with_the_stream_intact(tmp_path):
    """SIGTERM (handled by distcheck, not by the handler ray.init sets), then Ctrl-C while the
    first is being handled (cancelling, shutting Ray down): out at once, no Ray process left."""
    out = tmp_path / "run"
    driver = _distcheck(out, nap=1.0)
    try:
        _wait_for_records(out, driver, 2)
        os.kill(driver.pid, signal.SIGTERM)
        time.sleep(0.3)
        os.kill(driver.pid, signal.SIGINT)
        start = time.monotonic()
        _, err = driver.communicate(timeout=30)
        assert time.monotonic() - start < 2 and driver.returncode == 130, err
        assert "distcheck: SIGTERM: stopping" in err
        assert _gone(driver.pid, 15), "a Ray process outlived distcheck"
    finally:
        _kill_session(driver.pid)
    lines = _lines(out)  # every line parses: nothing half-written
    assert lines[0]["$report_type"] == "RunStart" and len(_case_lines(out)) >= 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.ray
def test_verdicts_after_a_node_loss_equal_an_undisturbed_run(tmp_path, undisturbed):
    """A two-node loopback cluster (cluster/local_cluster.sh), its worker node killed while the
    run uses both nodes: the lost node's cases run again on the head, none is an error."""
    port, state = _free_port(), tempfile.mkdtemp(prefix="dc-", dir="/tmp")  # Ray's socket paths: < 108 bytes
    env = {**os.environ, "PORT": str(port), "STATE": state}
    script = str(REPO / "cluster" / "local_cluster.sh")
    out = tmp_path / "run"
    driver = None
    try:
        subprocess.run([script, "start"], env=env, check=True, capture_output=True, timeout=180)
        driver = _distcheck(out, "--address", f"127.0.0.1:{port}", nap=0.15)
        _wait_for_records(out, driver, 2)  # both nodes are busy: 4 tasks in flight on 2 CPUs
        subprocess.run([script, "kill-worker"], env=env, check=True, capture_output=True, timeout=30)
        _, err = driver.communicate(timeout=240)
        assert driver.returncode == 1, err  # the wrong case fails, as undisturbed
    finally:
        if driver is not None:
            _kill_session(driver.pid)
        subprocess.run([script, "stop"], env=env, capture_output=True, timeout=60)
        shutil.rmtree(state, ignore_errors=True)
    assert _final_verdicts(out) == undisturbed
