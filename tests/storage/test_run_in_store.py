"""`distcheck run --out URL` on object storage (the local S3 server): records written as
segments, the report and the failure blocks beside them; a driver killed with SIGKILL in the
middle, resumed from the URL with an undisturbed run's verdicts; compare and report read the
run from there; a store that cannot be written is refused at once; no credential is ever
written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import s3fs

import distcheck.suites
from distcheck.cli import main
from distcheck.runner import RunOptions, run_suite
from distcheck.storage import location
from distcheck.storage.durations import load_durations
from distcheck.storage.segments import part_numbers, read_lines
from distcheck.suites import Selection
from tests.runner.fake_cli import SUITES, NapSuite
from tests.storage.s3 import ACCESS_KEY, SECRET_KEY

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAP = 0.3  # seconds a nap case sleeps in the killed run: long enough to kill it in the middle


@pytest.fixture(autouse=True)
def naps(monkeypatch):
    """Suites ``fake`` and ``naps`` (tests/runner/fake_cli.py) known to this process's command
    line; naps that do not sleep; a part every 0.2 s."""
    for name, where in SUITES.items():
        monkeypatch.setitem(distcheck.suites._SUITES, name, where)
    monkeypatch.setenv("FAKE_NAP", "0")
    monkeypatch.setenv("DISTCHECK_SEGMENT_SECONDS", "0.2")


def driver(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """``distcheck ARGS`` as a process of its own session (to be killed), with the test suites;
    its naps sleep ``NAP`` seconds."""
    command = [sys.executable, "-m", "tests.runner.fake_cli", *args]
    return subprocess.Popen(
        command,
        cwd=REPO,
        env={**os.environ, "FAKE_NAP": str(NAP), **(env or {})},
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def one_line_error(argv: list[str], capsys) -> str:
    """The message of a command that exits 2, checked to be one line."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def lines(url: str) -> list[dict]:
    return [json.loads(line.text) for line in read_lines(url)]


def case_ids(url: str) -> list[str]:
    return [line["id"] for line in lines(url) if line["$report_type"] == "CaseRecord"]


def report(url: str) -> dict:
    return json.loads(location.read_text(f"{url}/report.json"))


def no_credentials(bucket) -> None:
    for key, data in bucket.objects().items():
        assert ACCESS_KEY.encode() not in data and SECRET_KEY.encode() not in data, key


def test_a_run_in_the_store_writes_parts_a_report_and_blocks(s3):
    url = f"{s3.url}/runs/naps"
    assert main(["run", "--suite", "naps", "--serial", "--out", url, "--json", f"{s3.url}/runs/naps.json"]) == 1
    assert part_numbers(url) and not location.exists(f"{url}/records.jsonl")
    kinds = [line["$report_type"] for line in lines(url)]
    assert kinds[0] == "RunStart" and kinds[-1] == "RunFinish"
    summary = report(url)["summary"]
    assert summary["complete"] and summary["cases"] == len(case_ids(url))
    assert location.read_text(f"{s3.url}/runs/naps.json") == location.read_text(f"{url}/report.json")
    failed = [c for c in report(url)["cases"] if c.get("blocks")]
    assert failed and all(location.exists(f"{url}/blocks/{c['blocks']}") for c in failed)
    assert len(load_durations(url)) == summary["cases"]  # the next run's --durations, from the store
    no_credentials(s3)  # the server's credentials were in the driver's environment


def test_an_out_url_that_holds_a_run_or_cannot_be_written_is_refused_at_once(s3, capsys, monkeypatch):
    url = f"{s3.url}/runs/once"
    assert main(["run", "--suite", "naps", "--serial", "--ops", "nap0", "--out", url]) == 0
    capsys.readouterr()
    before = s3.objects()
    again = one_line_error(["run", "--suite", "naps", "--serial", "--out", url], capsys)
    assert f"{url} already holds a run: finish it with --resume {url}" in again
    nowhere = ["run", "--suite", "naps", "--out", "s3://no-such-bucket-here/run", "--address", "127.0.0.1:1"]
    # the store is checked first: the address (nothing listens there) is not even tried
    assert "cannot write the run folder to s3://no-such-bucket-here/run" in one_line_error(nowhere, capsys)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    s3fs.S3FileSystem.clear_instance_cache()  # not the one made with the keys
    denied = ["run", "--suite", "naps", "--serial", "--out", f"{s3.url}/runs/denied"]
    assert f"cannot write the run folder to {s3.url}/runs/denied" in one_line_error(denied, capsys)
    assert s3.objects() == before  # nothing written by the refused runs


def kill_session(sid: int) -> None:
    """SIGKILL every process of the session ``sid`` (the driver and whatever it started)."""
    ps = subprocess.run(["ps", "-eo", "pid=,sid="], capture_output=True, text=True).stdout.split()
    for pid in [int(p) for p, s in zip(ps[::2], ps[1::2]) if int(s) == sid]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_driver_killed_mid_run_resumes_from_the_url_with_the_undisturbed_verdicts(s3):
    undisturbed = {r.id: r.verdict for r in run_suite(NapSuite(), Selection(), RunOptions(serial=True)).records}
    url = f"{s3.url}/runs/killed"
    killed = driver("run", "--suite", "naps", "--serial", "--out", url)
    try:
        deadline = time.monotonic() + 120
        while len(case_ids(url) if part_numbers(url) else []) < 4:  # some parts written, the run going on
            assert killed.poll() is None, killed.communicate()
            assert time.monotonic() < deadline, "the run wrote too few parts"
            time.sleep(0.1)
        os.killpg(killed.pid, signal.SIGKILL)
        killed.wait(timeout=30)
    finally:
        kill_session(killed.pid)
        killed.communicate()
    before, parts = case_ids(url), part_numbers(url)
    assert 4 <= len(before) < len(undisturbed) and not location.exists(f"{url}/report.json")

    assert main(["run", "--resume", url]) == 1  # the suite's wrong op fails, as undisturbed
    assert {c["id"]: c["verdict"] for c in report(url)["cases"]} == undisturbed
    assert sorted(case_ids(url)) == sorted(undisturbed)  # each case once: those recorded not run again
    assert case_ids(url)[: len(before)] == before and part_numbers(url)[: len(parts)] == parts
    kinds = [line["$report_type"] for line in lines(url)]
    assert kinds.count("RunResume") == 1 and kinds[-1] == "RunFinish"

    assert main(["compare", url, f"{url}/report.json", "--fail-on", "none"]) == 0
    assert main(["report", url, "--junit", f"{s3.url}/runs/killed.junit.xml"]) == 0
    assert s3.objects()["runs/killed.junit.xml"].count(b"<testcase") == len(undisturbed)
    no_credentials(s3)


def test_a_driver_stopped_by_sigterm_writes_the_part_still_waiting(s3):
    url = f"{s3.url}/runs/stopped"
    stopped = driver("run", "--suite", "naps", "--serial", "--out", url, env={"DISTCHECK_SEGMENT_SECONDS": "3600"})
    try:
        for line in stopped.stderr:  # cases are done, their part not due for an hour
            if line.startswith("progress:"):
                break
        stopped.send_signal(signal.SIGTERM)
        stopped.communicate(timeout=60)
    finally:
        kill_session(stopped.pid)
    assert stopped.returncode == 128 + signal.SIGTERM
    kinds = [line["$report_type"] for line in lines(url)]
    assert part_numbers(url) == [1] and kinds[0] == "RunStart" and kinds[-1] == "RunFinish"
    summary = report(url)["summary"]
    assert not summary["complete"] and 1 <= summary["cases"] == len(case_ids(url))  # none lost


def test_a_file_url_is_a_local_run_folder(tmp_path, capsys):
    url = f"file://{tmp_path}/run"
    assert main(["run", "--suite", "naps", "--serial", "--ops", "nap0", "--out", url]) == 0
    assert (tmp_path / "run" / "records.jsonl").is_file() and (tmp_path / "run" / "report.json").is_file()
    capsys.readouterr()
    again = one_line_error(["run", "--resume", url], capsys)
    assert f"cannot resume {tmp_path}/run: the run is finished" in again


def test_bad_urls_are_one_line_each_naming_what_was_given(s3, capsys):
    run = ["run", "--suite", "naps", "--serial"]
    with_keys = one_line_error([*run, "--out", "s3://AKIDEXAMPLE:hush@bucket/x"], capsys)
    assert "credentials would be written" in with_keys and "hush" not in with_keys  # nor into a log
    json_report = one_line_error([*run, "--json", "s3://no-such-bucket-here/r.json"], capsys)
    assert "cannot write the JSON report to s3://no-such-bucket-here/r.json: The specified bucket does not exist" in (
        json_report
    )
    durations = one_line_error([*run, "--durations", f"{s3.url}/nope.json"], capsys)
    assert f"--durations: cannot read {s3.url}/nope.json: no such file or object" in durations
    assert "Protocol not known: nosuchstore" in one_line_error([*run, "--out", "nosuchstore://x/run"], capsys)
    assert f"cannot resume {s3.url}/missing: no such folder" in one_line_error(
        ["run", "--resume", f"{s3.url}/missing"], capsys
    )
    assert s3.objects() == {}
