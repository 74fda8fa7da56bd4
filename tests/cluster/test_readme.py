"""cluster/README.md, a team's deployment guide: every command in it is one that the tests run
or validate here — distcheck commands parse with distcheck's own parser, `ray job submit` lines
have the shapes test_ray_job_submit.py submits, manifests and scripts exist with the settings
named, and no other kind of command appears."""

from __future__ import annotations

import json
import re
import shlex

import pytest

from distcheck.cli import parser
from tests.cluster.test_kuberay import MANIFESTS, ROOT

README = ROOT / "cluster" / "README.md"
NIGHTLY_SETTINGS = {"ADDRESS", "OUT", "PREVIOUS", "PYTHON", "TIMEOUT", "SUITES"}
EXECUTOR_SETTINGS = {"DISTCHECK_EXECUTOR", "DISTCHECK_RAY_ADDRESS"}
SUBMIT_OPTIONS = {"--address", "--working-dir", "--runtime-env-json"}  # those test_ray_job_submit.py gives


def commands() -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(), flags=re.S)
    lines = [line.split("  #")[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line]


def settings(words: list[str]) -> tuple[dict[str, str], list[str]]:
    """The leading NAME=value words, and the command after them."""
    found = {}
    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
        name, _, value = words.pop(0).partition("=")
        found[name] = value
    return found, words


def check_distcheck(words: list[str]) -> None:
    assert words[0] == "distcheck"
    parser().parse_args(words[1:])  # exits (status 2) on anything distcheck refuses


def check_submit(words: list[str]) -> None:
    options, entrypoint = words[3 : words.index("--")], words[words.index("--") + 1 :]
    given = dict(zip(options[::2], options[1::2]))
    assert set(given) <= SUBMIT_OPTIONS and given["--address"].startswith("http://")
    if entrypoint[0] == "distcheck":
        return check_distcheck(entrypoint)
    assert entrypoint == ["bash", "nightly.sh"] and given["--working-dir"] == "cluster"
    assert set(json.loads(given["--runtime-env-json"])["env_vars"]) <= NIGHTLY_SETTINGS


def check(line: str) -> None:
    env, words = settings(shlex.split(line))
    head = " ".join(words[:2])
    if words[0] == "distcheck":
        check_distcheck(words)
    elif head == "ray job":
        assert words[2] == "submit"
        check_submit(words)
    elif head in ("kubectl apply", "kubectl create") and words[2] == "-f":
        assert words[3].removeprefix("cluster/kuberay/") + "#0" in MANIFESTS
    elif head == "kubectl create" and words[2:4] == ["secret", "generic"]:
        assert all(w.startswith("--from-literal=AWS_") for w in words[5:])  # what s3fs reads
    elif head == "docker build":
        assert (ROOT / words[words.index("-f") + 1]).is_file()
    elif words[0] == "cluster/nightly.sh":
        assert set(env) <= NIGHTLY_SETTINGS
    elif words[0] == "cluster/local_cluster.sh":
        assert f"\n  {words[1]})" in (ROOT / words[0]).read_text()
    elif words[1:3] == ["-m", "pytest"] and (ROOT / words[-1].split("::")[0]).exists():
        assert set(env) <= EXECUTOR_SETTINGS | {"KUBERAY_CRDS"}
    else:
        raise AssertionError("a command that no test runs or validates")


@pytest.mark.parametrize("line", commands())
def test_every_command_of_the_deployment_guide_is_one_the_tests_run_or_validate(line):
    check(line)


def test_a_command_the_tests_do_not_know_is_refused():
    unknown = ("distcheck run --no-such-option", "ray job submit --address http://h:8265 -- rm -rf /", "helm install x")
    for line in unknown:
        with pytest.raises((AssertionError, SystemExit)):
            check(line)
