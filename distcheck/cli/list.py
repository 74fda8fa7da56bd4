"""``distcheck list``: a suite's case ids, one a line (or, with ``--suites``, the suites)."""

from __future__ import annotations

import argparse
import os
import sys

from distcheck.cli.arguments import USAGE_ERROR, selection, selection_arguments, suite
from distcheck.suites import suite_sources


def add_parser(commands) -> None:
    listing = commands.add_parser("list", help="list a suite's case ids", description="List a suite's case ids.")
    selection_arguments(listing)
    listing.add_argument(
        "--suites", action="store_true", help="list the suites instead (built-in and installed), with their origin"
    )
    listing.set_defaults(func=execute)


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    from distcheck.runner.run import select

    if args.suites:
        return _list_suites()
    count = 0
    try:
        for case in select(suite(args), selection(args), args.max_cases):
            count += 1
            status = "" if case.status == "run" else f"\t[{case.status}] {case.reason}"
            print(f"{case.key}{status}")
        sys.stdout.flush()
    except BrokenPipeError:  # the reader stopped early (`distcheck list | head`): not an error
        _quiet_stdout()
        return 0
    if not count:
        print("distcheck: no case matches the selection", file=sys.stderr)
        return USAGE_ERROR
    return 0


def _list_suites() -> int:
    """Every suite ``--suite`` takes by name, where it comes from, and what it loads (nothing
    is imported: a broken plugin shows up here and fails only when it is used)."""
    sources = suite_sources()
    width = max(len(source.name) for source in sources)
    for source in sources:
        print(f"{source.name:<{width}}  {source.origin} ({source.target})")
    return 0


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: Python's flush at exit would raise BrokenPipeError again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
