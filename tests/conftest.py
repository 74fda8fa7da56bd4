"""A test session leaves nothing in the checkout: tests write only under their temporary folders.
The files git does not track (ignored ones included, caches excepted) are listed when the session
starts and when it ends; any new one fails the session, named."""

from __future__ import annotations

import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CACHES = {"__pycache__", ".pytest_cache", ".ruff_cache", ".venv"}
BEFORE = pytest.StashKey[frozenset[str] | None]()


def untracked(root: pathlib.Path = ROOT) -> frozenset[str] | None:
    """The checkout's files that git does not track, caches left out (None outside a git checkout)."""
    try:
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=all", "--ignored"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    paths = (line[3:] for line in status.splitlines() if line[:2] in ("??", "!!"))
    return frozenset(p for p in paths if not _is_cache(p))


def _is_cache(path: str) -> bool:
    parts = path.split("/")
    return bool(CACHES.intersection(parts)) or path.endswith(".pyc") or any(p.endswith(".egg-info") for p in parts)


def _controller(session: pytest.Session) -> bool:
    return not hasattr(session.config, "workerinput")  # pytest-xdist's workers: the controller checks


def pytest_sessionstart(session: pytest.Session) -> None:
    if _controller(session):
        session.config.stash[BEFORE] = untracked()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = session.config.stash.get(BEFORE, None)
    if not _controller(session) or before is None:
        return
    left = sorted((untracked() or frozenset()) - before)
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = f"the tests left {len(left)} file(s) in the checkout {ROOT}: " + ", ".join(left[:20])
        if reporter is not None:
            reporter.write_line(f"ERROR: {message}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
