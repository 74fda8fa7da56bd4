"""cluster/nightly.sh, as the KubeRay RayCronJob runs it: reports to object storage, the previous
night's report for --durations and compare, both modes, a GPU run; every command it gives
distcheck is one distcheck accepts. distcheck itself is replaced by a recorder here (the runs
are tested elsewhere): what is tested is the script."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys

import pytest

from distcheck.cli import parser
from distcheck.storage import location
from tests.cluster.test_kuberay import MANIFESTS, ROOT

NIGHTLY_BUCKET = "s3://distcheck-nightly"


@pytest.fixture
def recorder(tmp_path):
    """A `python` that records each `python -m distcheck ...` (and runs every other command with
    this Python): the commands, in order, as argument lists in ``log``."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    log = tmp_path / "commands.jsonl"
    record = tmp_path / "record.py"
    record.write_text("import json, sys\nopen(sys.argv[1], 'a').write(json.dumps(sys.argv[2:]) + '\\n')\n")
    (bin_ / "python").write_text(
        "#!/usr/bin/env bash\n"
        f'if [[ "$1" == -m && "$2" == distcheck ]]; then exec {sys.executable} {record} {log} "${{@:3}}"; fi\n'
        f'exec {sys.executable} "$@"\n'
    )
    (bin_ / "python").chmod(0o755)
    return bin_, log


def commands(log) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def nightly_entrypoint() -> str:
    (cron,) = [m for m in MANIFESTS.values() if m["kind"] == "RayCronJob"]
    return cron["spec"]["jobTemplate"]["entrypoint"]


def run_entrypoint(entrypoint: str, bucket: str, bin_, env: dict[str, str]) -> subprocess.CompletedProcess:
    command = entrypoint.replace(NIGHTLY_BUCKET, bucket).replace("/opt/distcheck", str(ROOT))
    environment = {**os.environ, **env, "PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["bash", "-c", command], env=environment, capture_output=True, text=True, timeout=300)


pytestmark = pytest.mark.slow  # the script asks the store through a Python process at each step


def test_the_nightly_cron_job_runs_both_modes_into_the_store_against_the_previous_night(s3, recorder):
    bin_, log = recorder
    today = datetime.date.today()
    previous = f"{s3.url}/nightly-{today - datetime.timedelta(days=1)}"
    location.write_text(f"{previous}/torch-opinfo-slow.json", '{"summary": {}, "cases": []}')
    done = f"{s3.url}/nightly-{today}/tensorplay-opinfo-fast"  # finished earlier tonight: not run again
    location.write_text(f"{done}/report.json", '{"summary": {"complete": true}, "cases": []}')
    interrupted = f"{s3.url}/nightly-{today}/torch-opinfo-fast"  # interrupted: resumed
    location.write_text(f"{interrupted}/records/part-000001.jsonl", '{"$report_type": "RunStart"}\n')

    finished = run_entrypoint(nightly_entrypoint(), s3.url, bin_, {"RAY_ADDRESS": "10.0.0.5:6379"})
    assert finished.returncode == 0, finished.stdout + finished.stderr

    given = [parser().parse_args(argv) for argv in commands(log)]  # each one distcheck accepts
    runs = [args for args in given if args.command == "run"]
    out = f"{s3.url}/nightly-{today}"
    assert [(a.resume, a.suite, a.mode, a.device) for a in runs] == [
        (interrupted, "torch-opinfo", "fast", "cpu"),  # --resume: the rest from the run folder
        (None, "torch-opinfo", "slow", "cpu"),
        (None, "torch-opinfo", "slow", "cuda"),
    ]
    assert all(a.address == "10.0.0.5:6379" for a in runs)  # the cluster `ray job submit` names
    assert all(a.history == f"{s3.url}/history" for a in runs)  # each run added to the history beside the nights
    assert [a.out for a in runs[1:]] == [f"{out}/torch-opinfo-slow", f"{out}/torch-opinfo-slow-cuda"]
    assert runs[1].json == f"{out}/torch-opinfo-slow.json" and runs[1].html == f"{out}/torch-opinfo-slow.html"
    assert runs[1].durations == f"{previous}/torch-opinfo-slow.json" and runs[2].durations is None
    compared = [(a.old, a.format) for a in given if a.command == "compare"]
    assert compared == []  # the recorder wrote no report tonight: nothing to compare
    assert "no previous night's report to compare with" in finished.stdout


def test_each_run_is_compared_with_the_previous_nights_report_kept_as_markdown(s3, recorder, tmp_path):
    bin_, log = recorder
    previous, out = f"{s3.url}/night-1", f"{s3.url}/night-2"
    for night in (previous, out):  # tonight's report as the run leaves it (the recorder writes none)
        location.write_text(f"{night}/torch-opinfo-fast.json", '{"summary": {}, "cases": []}')
    env = {"OUT": out, "PREVIOUS": previous, "SUITES": "torch-opinfo:fast", "PYTHON": str(bin_ / "python")}
    finished = subprocess.run(
        [str(ROOT / "cluster" / "nightly.sh")], env={**os.environ, **env}, capture_output=True, text=True, timeout=300
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    given = [parser().parse_args(argv) for argv in commands(log)]
    assert [(a.command, getattr(a, "format", None)) for a in given] == [
        ("run", None),
        ("compare", "text"),
        ("compare", "markdown"),
        ("history", "markdown"),
    ]
    assert given[0].address == "auto" and given[1].old == f"{previous}/torch-opinfo-fast.json"
    assert given[1].history == given[3].store == f"{s3.url}/history"
    assert location.exists(f"{out}/torch-opinfo-fast.compare.md")
