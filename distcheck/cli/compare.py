"""``distcheck compare OLD NEW``: what changed between two runs (JSON reports or run folders)."""

from __future__ import annotations

import argparse


def add_parser(commands) -> None:
    from distcheck.reports.compare import FAIL_ON, FORMATS

    compare = commands.add_parser(
        "compare",
        help="what changed between two runs",
        description="Compare two runs (each a JSON report or a run folder): new failures, fixed, still "
        "failing, newly flaky, added, removed and much slower cases. Exit status 1 when NEW has a new failure "
        "(--fail-on), 0 otherwise, 2 for usage errors.",
    )
    compare.add_argument("old", metavar="OLD", help="the earlier run: a JSON report or a run folder")
    compare.add_argument("new", metavar="NEW", help="the later run: a JSON report or a run folder")
    compare.add_argument("--format", choices=FORMATS, default="text", help="text (default), markdown or json")
    compare.add_argument(
        "--fail-on",
        choices=FAIL_ON,
        default="new",
        help="exit 1 when NEW has a new failure (new, default), any failing case (any), never (none)",
    )
    compare.set_defaults(func=execute)


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    from distcheck.reports import compare
    from distcheck.reports.load import load_run

    comparison = compare.compare(load_run(args.old), load_run(args.new))
    print(compare.formatted(comparison, args.format))
    return comparison.exit_status(args.fail_on)
