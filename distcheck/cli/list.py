"""``distcheck list``: a suite's case ids, one a line (or, with ``--suites``, the suites; with
``--ops`` and no names, the suite's op names)."""

from __future__ import annotations

import argparse
import os
import sys

from distcheck.cli.arguments import OP_NAMES, USAGE_ERROR, selected_work, selection, selection_arguments, suite
from distcheck.suites import GroupInfo, suite_sources


def add_parser(commands) -> None:
    listing = commands.add_parser(
        "list", help="list a suite's case ids (or its ops, or the suites)", description="List a suite's case ids."
    )
    selection_arguments(listing, op_names=True)
    listing.add_argument(
        "--suites", action="store_true", help="list the suites instead (built-in and installed), with their origin"
    )
    listing.set_defaults(func=execute)


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    if args.suites:
        return _list_suites()
    listing_ops = args.ops is OP_NAMES
    if listing_ops:
        args.ops = None
    lines = _op_names(args) if listing_ops else _case_lines(args)
    count = 0
    try:
        for line in lines:
            count += 1
            print(line)
        sys.stdout.flush()
    except BrokenPipeError:  # the reader stopped early (`distcheck list | head`): not an error
        _quiet_stdout()
        return 0
    if not count:
        print("distcheck: no case matches the selection", file=sys.stderr)
        return USAGE_ERROR
    return 0


def _case_lines(args: argparse.Namespace):
    from distcheck.runner.run import select

    for case in select(suite(args), selection(args), args.max_cases):
        status = "" if case.status == "run" else f"\t[{case.status}] {case.reason}"
        yield f"{case.key}{status}"


def _op_names(args: argparse.Namespace):
    """The names of the ops with selected cases, from the suite's metadata where it has groups
    (no sample is made)."""
    work = selected_work(suite(args), selection(args), args.max_cases)
    yield from dict.fromkeys(item.op if isinstance(item, GroupInfo) else item.id.op for item in work)


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
