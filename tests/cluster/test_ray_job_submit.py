"""`ray job submit` to a running cluster (a loopback cluster with Ray's job server): a small
`distcheck run` and cluster/nightly.sh submitted as Ray jobs join the cluster through the
RAY_ADDRESS the job server sets; the job succeeds or fails as distcheck does."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from benchmarks.loopback import AUTH, LoopbackCluster, ray_command
from tests.cluster.test_kuberay import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.ray]


@pytest.fixture(scope="module")
def cluster():
    with LoopbackCluster(nodes=2, cpus=1, log=lambda line: None, dashboard=True) as started:
        yield started


def submit(cluster: LoopbackCluster, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    command = [ray_command(), "job", "submit", "--address", cluster.dashboard_url, *args]
    environment = {**os.environ, **AUTH, **(env or {})}
    return subprocess.run(command, env=environment, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_a_submitted_run_joins_the_cluster_and_succeeds_as_distcheck_does(cluster, tmp_path):
    out = tmp_path / "run"
    job = submit(
        cluster, "--", sys.executable, "-m", "distcheck", "run", "--suite", "example-functions", "--out", str(out)
    )
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
    assert "on ray, 2 worker(s)" in job.stdout  # the cluster's two nodes, found through $RAY_ADDRESS
    summary = json.loads((out / "report.json").read_text())["summary"]
    assert summary["complete"] and summary["cases"] == 32


def test_a_submitted_run_that_distcheck_refuses_fails_the_job_with_its_status(cluster):
    job = submit(cluster, "--", sys.executable, "-m", "distcheck", "run", "--suite", "no-such-suite")
    assert job.returncode != 0
    assert "unknown suite 'no-such-suite'" in job.stdout and "failed with exit code 2" in job.stdout


def test_the_nightly_submitted_with_its_folder_and_a_runtime_environment(cluster, tmp_path):
    settings = {"OUT": str(tmp_path / "nightly"), "SUITES": "example-functions:fast", "PYTHON": sys.executable}
    runtime_env = json.dumps({"env_vars": settings})
    job = submit(cluster, "--working-dir", "cluster", "--runtime-env-json", runtime_env, "--", "bash", "nightly.sh")
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
    assert (tmp_path / "nightly" / "example-functions-fast.json").exists()
    assert (tmp_path / "nightly" / "example-functions-fast.html").exists()
