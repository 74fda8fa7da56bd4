"""The session check of tests/conftest.py: a test that leaves a file in the checkout fails the
session (run on a git checkout of its own, with a copy of the conftest)."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest

CONFTEST = pathlib.Path(__file__).with_name("conftest.py")


def _session(tmp_path: pathlib.Path, body: str) -> subprocess.CompletedProcess:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "tests").mkdir()
    shutil.copy(CONFTEST, tmp_path / "tests" / "conftest.py")
    (tmp_path / "tests" / "test_it.py").write_text(f"import pathlib\n\n\ndef test_it(tmp_path):\n    {body}\n")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
    return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)


@pytest.mark.parametrize("where", ["stray.txt", "runs/fake-fast-20261202T000000Z/records.jsonl"])
def test_a_file_left_in_the_checkout_fails_the_session(tmp_path, where):
    (tmp_path / ".gitignore").write_text("runs/\n")
    path = f"pathlib.Path(__file__).parents[1] / {where!r}"
    body = f"p = {path}; p.parent.mkdir(parents=True, exist_ok=True); p.write_text('')"
    result = _session(tmp_path, body)
    assert result.returncode == 1 and "1 passed" in result.stdout, result.stdout + result.stderr
    assert f"the tests left 1 file(s) in the checkout {tmp_path}: {where}" in result.stdout


def test_files_under_tmp_path_do_not(tmp_path):
    result = _session(tmp_path, "(tmp_path / 'fine.txt').write_text('')")
    assert result.returncode == 0, result.stdout + result.stderr
