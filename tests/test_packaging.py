"""The package's claims are true: ``requires-python``'s floor is the version ruff targets, every
module parses with that version's grammar, the package imports on it, and every make target
named phony exists."""

from __future__ import annotations

import ast
import os
import pathlib
import re
import subprocess
import sys
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SOURCES = sorted(
    p for folder in ("distcheck", "tests", "benchmarks", "cluster", "examples") for p in (ROOT / folder).rglob("*.py")
)


def _floor() -> tuple[int, int]:
    claim = PROJECT["project"]["requires-python"]
    match = re.fullmatch(r">=\s*3\.(\d+)", claim)
    assert match, f"requires-python {claim!r}: expected >=3.N"
    return 3, int(match[1])


def test_ruff_targets_the_oldest_python_claimed():
    assert PROJECT["tool"]["ruff"]["target-version"] == f"py3{_floor()[1]}"


def test_every_module_parses_with_the_oldest_python_claimed():
    for path in SOURCES:
        ast.parse(path.read_text(), str(path), feature_version=_floor())


@pytest.mark.slow
def test_every_module_imports_with_the_oldest_python_claimed():
    """In a fresh interpreter of the floor's version: this one if it is (CI runs the floor), else skipped."""
    if sys.version_info[:2] != _floor():
        pytest.skip(f"this is Python {sys.version_info[0]}.{sys.version_info[1]}, the claim's floor is {_floor()}")
    code = (
        "import importlib, pkgutil, distcheck\n"
        "for m in pkgutil.walk_packages(distcheck.__path__, 'distcheck.'):\n"
        "    if m.name != 'distcheck.__main__':\n"
        "        importlib.import_module(m.name)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-3000:]


def test_every_phony_make_target_exists():
    makefile = (ROOT / "Makefile").read_text()
    phony = re.search(r"^\.PHONY:(.*)$", makefile, flags=re.M)[1].split()
    targets = set(re.findall(r"^([A-Za-z][\w-]*):", makefile, flags=re.M))
    assert set(phony) <= targets, f"phony targets with no rule: {sorted(set(phony) - targets)}"
