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
    compare.add_argument(
        "--history",
        metavar="STORE",
        help="the history store (`distcheck history`): mark each failure of NEW as new, failing since NIGHT or "
        "flaky (k of the last n nights), from the stored runs up to NEW's night and NEW itself",
    )
    compare.set_defaults(func=execute)


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    from distcheck.reports import compare
    from distcheck.reports.load import load_run

    old, new = load_run(args.old), load_run(args.new)
    marks = None
    if args.history:
        from distcheck.history.marks import run_history

        marks = run_history(args.history, new, add=False).marks(new.records)
    comparison = compare.compare(old, new, marks)
    print(compare.formatted(comparison, args.format))
    return comparison.exit_status(args.fail_on)
