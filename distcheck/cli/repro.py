"""``distcheck repro CASE_ID``: print a standalone script that reproduces one case."""

from __future__ import annotations

import argparse

from distcheck.suites import MODES


def add_parser(commands) -> None:
    repro = commands.add_parser(
        "repro",
        help="print a standalone script that reproduces one case",
        description="Print a Python script that rebuilds a case's inputs as the run did and makes its "
        "gradcheck / gradgradcheck calls with the case's exact options.",
    )
    repro.add_argument("case", metavar="CASE_ID", help="suite::op::dtype::sampleN::check (the suite part optional)")
    repro.add_argument(
        "--suite",
        help="the suite: a name or MODULE:NAME (needed for a suite loaded from a module: the reports' commands "
        "name it), or the suite of a CASE_ID without one (default torch-opinfo)",
    )
    repro.add_argument("--mode", choices=MODES, default="fast", help="the run's mode (default fast)")
    repro.set_defaults(func=execute)


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    from distcheck.reports import repro

    print(repro.reproducer(args.case, args.suite, args.mode), end="")
    return 0
