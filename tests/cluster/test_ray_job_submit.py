"""`ray job submit` to a running cluster (a loopback cluster with Ray's job server): a small
`distcheck run` and cluster/nightly.sh submitted as Ray jobs join the cluster through the
RAY_ADDRESS the job server sets, and write their run folders and reports to object storage
(the local S3 server; its endpoint and credentials given as the job's environment); the job
succeeds or fails as distcheck does."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from benchmarks.loopback import AUTH, LoopbackCluster, ray_command
from distcheck.storage import location
from tests.cluster.test_kuberay import ROOT
from tests.storage.s3 import ACCESS_KEY, SECRET_KEY

pytestmark = [pytest.mark.slow, pytest.mark.ray]


@pytest.fixture(scope="module")
def cluster():
    with LoopbackCluster(nodes=2, cpus=1, log=lambda line: None, dashboard=True) as started:
        yield started


def submit(cluster: LoopbackCluster, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    command = [ray_command(), "job", "submit", "--address", cluster.dashboard_url, *args]
    environment = {**os.environ, **AUTH, **(env or {})}
    return subprocess.run(command, env=environment, cwd=ROOT, capture_output=True, text=True, timeout=600)


def no_credentials(bucket) -> None:
    """The credentials were the job's environment: never written into an object."""
    for key, data in bucket.objects().items():
        assert ACCESS_KEY.encode() not in data and SECRET_KEY.encode() not in data, key


def test_a_submitted_run_joins_the_cluster_and_its_run_folder_lands_in_the_store(cluster, s3):
    out = f"{s3.url}/runs/submitted"
    runtime_env = json.dumps({"env_vars": s3.server.environment})
    command = [sys.executable, "-m", "distcheck", "run", "--suite", "example-functions", "--out", out]
    job = submit(cluster, "--runtime-env-json", runtime_env, "--", *command)
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
    assert "on ray, 2 worker(s)" in job.stdout  # the cluster's two nodes, found through $RAY_ADDRESS
    summary = json.loads(location.read_text(f"{out}/report.json"))["summary"]
    assert summary["complete"] and summary["cases"] == 32 and "started" in summary
    no_credentials(s3)


def test_a_submitted_run_that_distcheck_refuses_fails_the_job_with_its_status(cluster):
    job = submit(cluster, "--", sys.executable, "-m", "distcheck", "run", "--suite", "no-such-suite")
    assert job.returncode != 0
    assert "unknown suite 'no-such-suite'" in job.stdout and "failed with exit code 2" in job.stdout


def test_the_nightly_submitted_with_its_folder_and_a_runtime_environment(cluster, s3):
    settings = {"OUT": f"{s3.url}/nightly", "SUITES": "example-functions:fast", "PYTHON": sys.executable}
    runtime_env = json.dumps({"env_vars": {**s3.server.environment, **settings}})
    job = submit(cluster, "--working-dir", "cluster", "--runtime-env-json", runtime_env, "--", "bash", "nightly.sh")
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
    assert location.exists(f"{s3.url}/nightly/example-functions-fast.json")
    assert location.exists(f"{s3.url}/nightly/example-functions-fast.html")
    assert location.exists(f"{s3.url}/nightly/example-functions-fast/report.json")
    no_credentials(s3)
