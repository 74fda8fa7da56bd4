"""The command line with the test suites registered, for tests that run it as a process:

    python -m tests.runner.fake_cli run --suite naps ...

Suite ``fake`` is :class:`~tests.runner.fake_suite.FakeSuite`; suite ``naps`` is 6 ops × 2
samples that sleep ``$FAKE_NAP`` seconds each and pass, one wrong op (fails) and one xfail:
cases long enough to interrupt, kill or lose a node under, in separate groups (each op is its
own Ray task, so that every node has work).
"""

from __future__ import annotations

import sys

import distcheck.suites
from distcheck.cli import main
from tests.runner.fake_suite import FakeSuite

NAPS = tuple(f"nap{k}" for k in range(6))
SUITES = {"fake": "tests.runner.fake_suite:FakeSuite", "naps": "tests.runner.fake_cli:NapSuite"}


class NapSuite(FakeSuite):
    def __init__(self, mode: str = "fast"):
        super().__init__(mode, ops=(*NAPS, "wrong", "xfail"), samples=2)


def register() -> None:
    distcheck.suites._SUITES.update(SUITES)


if __name__ == "__main__":
    register()
    sys.exit(main(sys.argv[1:]))
