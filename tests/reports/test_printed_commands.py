"""Every command a run prints works as printed, for every kind of suite: the ``rerun:`` and
``repro:`` lines of the console summary, the reproducer in the JUnit XML and on the HTML page
(its failure cards and its case table's template), and the ``resume it:`` line of an
interrupted run. Each is run as a shell command, as a user pastes it."""

from __future__ import annotations

import html
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from xml.etree import ElementTree

import pytest

ROOT = Path(__file__).resolve().parents[2]
DECLARED = "tests.suites.declared_suites:suite"  # a declared suite, named "declared"

# (kind, --suite, the run's other arguments, the failing case, its verdict, the exit status of
# its rerun and of its reproducer): a built-in suite's case failed by a tiny --timeout (its
# rerun and reproducer pass), a declared suite's wrong backward by MODULE:NAME (slow mode) and
# as an installed suite (an entry point of a package on the path).
KINDS = [
    (
        "built-in",
        "torch-opinfo",
        ["--ops", "add", "--dtypes", "float64", "--checks", "grad", "--max-cases", "1", "--timeout", "0.0001"],
        "torch-opinfo::add::float64::sample0::grad",
        "timeout",
        0,
    ),
    (
        "module",
        DECLARED,
        ["--ops", "wrong", "--mode", "slow", "-k", "sample0"],
        "declared::wrong::float64::sample0::grad",
        "fail",
        1,
    ),
    (
        "installed",
        "declared",
        ["--ops", "wrong", "-k", "sample0"],
        "declared::wrong::float64::sample0::grad",
        "fail",
        1,
    ),
]


@pytest.fixture
def environment(tmp_path) -> dict[str, str]:
    """This venv's ``distcheck`` and ``python`` first on the PATH, the tests importable."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return {**os.environ, "PATH": path, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0"}


def _installed(environment: dict[str, str], site: Path) -> dict[str, str]:
    """``environment`` with a package that installs the declared suite as ``declared`` (its
    metadata on the path): only then is ``declared`` a suite's name a new process knows."""
    info = site / "declared_suite-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: declared-suite\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[distcheck.suites]\ndeclared = {DECLARED}\n")
    return {**environment, "PYTHONPATH": f"{environment['PYTHONPATH']}{os.pathsep}{site}"}


def _shell(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _printed(out: str, label: str) -> list[str]:
    return [line.split(f"{label}: ", 1)[1] for line in out.splitlines() if line.strip().startswith(f"{label}: ")]


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "spec", "args", "case", "verdict", "status"), KINDS, ids=[k[0] for k in KINDS])
def test_rerun_and_repro_commands_work_as_printed(kind, spec, args, case, verdict, status, tmp_path, environment):
    if kind == "installed":
        environment = _installed(environment, tmp_path / "site")
    run = [
        "distcheck",
        "run",
        "--suite",
        spec,
        *args,
        "--serial",
        "--out",
        "run",
        "--junit",
        "j.xml",
        "--html",
        "h.html",
    ]
    done = _shell(shlex.join(run), tmp_path, environment)
    assert done.returncode == 1 and f"{verdict.upper()} {case}" in done.stdout, done.stdout + done.stderr
    (rerun,) = _printed(done.stdout, "rerun")
    (repro,) = _printed(done.stdout, "repro")
    outcomes = ElementTree.parse(tmp_path / "j.xml").iter()
    (in_junit,) = [line for e in outcomes if e.tag in ("failure", "error") for line in _printed(e.text, "reproduce")]
    page = (tmp_path / "h.html").read_text()
    (on_card,) = [html.unescape(c) for c in re.findall(r"Reproduce: <code>(.*?)</code>", page)]
    table = json.loads(re.search(r'id="case-data">(.*?)</script>', page).group(1))["repro"].replace("{id}", case)
    assert repro == in_junit == on_card == table  # one reproducer, wherever it is shown

    again = _shell(rerun, tmp_path, environment)
    assert again.returncode == status, again.stdout + again.stderr
    assert ": 1 cases in " in again.stdout and case in (tmp_path / "runs").glob("*/report.json").__next__().read_text()
    reproduced = _shell(repro, tmp_path, environment)
    assert reproduced.returncode == status, reproduced.stdout + reproduced.stderr
    assert reproduced.stdout.strip().endswith("passed") if status == 0 else "GradcheckError" in reproduced.stderr


@pytest.mark.slow
def test_the_resume_command_of_an_interrupted_run_works_as_printed(tmp_path, environment):
    """A run of a MODULE:NAME suite stopped by Ctrl-C during its sleepy case; the printed
    command finishes it (the sleepy case then times out: --timeout is the run's)."""
    run = ["distcheck", "run", "--suite", DECLARED, "--ops", "sin,sleepy", "--checks", "grad", "--dtypes", "float64"]
    run += ["--serial", "--timeout", "3", "--out", "run"]
    driver = subprocess.Popen(
        run, cwd=tmp_path, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    records = tmp_path / "run" / "records.jsonl"
    deadline = time.monotonic() + 300
    while not (records.exists() and records.read_text().count('"CaseRecord"') >= 3):  # sin's two, sleepy's first
        assert driver.poll() is None and time.monotonic() < deadline, driver.communicate()
        time.sleep(0.2)
    driver.send_signal(signal.SIGINT)
    out, err = driver.communicate(timeout=120)
    assert driver.returncode == 130, out + err
    (resume,) = _printed(out, "resume it")
    assert f"resume with: {resume}" in err
    resumed = _shell(resume, tmp_path, environment)
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr  # the sleepy case timed out
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["summary"]["complete"] and report["summary"]["verdicts"]["timeout"] == 1
