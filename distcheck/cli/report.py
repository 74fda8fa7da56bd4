"""``distcheck report RUN``: the JUnit XML and HTML reports of a past run; the same files for
``distcheck run --junit / --html``. With ``--history STORE``: the run added to the history, its
summary with each failure marked from the history, and a trends page in the HTML report."""

from __future__ import annotations

import argparse

from distcheck.cli.arguments import DEFAULT_SUITE
from distcheck.cli.history import history_option, of_run, trends_section
from distcheck.suites import UsageError


def add_parser(commands) -> None:
    report = commands.add_parser(
        "report",
        help="JUnit XML and HTML reports of a past run",
        description="Write the reports of a past run (a JSON report or a run folder; paths may be URLs of an object "
        "store: s3://bucket/runs/x, needs distcheck[cloud]); with --history, add it to the history store and print its "
        "summary, each failure marked new, failing since NIGHT or flaky.",
    )
    report.add_argument("path", metavar="RUN", help="a JSON report or a run folder (a path or URL)")
    report_options(report)
    report.set_defaults(func=execute)


def report_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--junit", metavar="FILE", help="also write JUnit XML (as pytest's xunit2) for a CI dashboard (a path or URL)"
    )
    parser.add_argument(
        "--junit-names",
        choices=("distcheck", "pytorch"),
        default="distcheck",
        help="distcheck (default): a testcase per case; pytorch: a testcase per PyTorch test of torch-opinfo "
        "(TestBwdGradientsCPU.test_fn_grad_sinh_cpu_float64), the outcome of all its samples",
    )
    parser.add_argument(
        "--html",
        metavar="FILE",
        help="also write an HTML report (one self-contained file: summary, filterable cases, heatmaps of failures; "
        "a path or URL)",
    )
    history_option(parser)


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    from distcheck.reports import console
    from distcheck.reports.load import load_run

    if not (args.junit or args.html or args.history):
        raise UsageError("nothing to write: give --junit FILE, --html FILE and/or --history STORE")
    run = load_run(args.path)
    check_junit_names(args, str(run.info.get("suite", "")))
    known = of_run(args, run)
    if known is not None:
        print(console.summary(loaded_result(run), folder=run.folder, marks=known.marks(run.records), spec=run.spec))
    write_files(args, run, known)
    return 0


def loaded_result(run):
    """The :class:`RunResult` of a loaded run, for its console summary."""
    from distcheck.records.result import RunResult

    info = run.info
    return RunResult(
        str(info.get("suite", "")),
        str(info.get("mode", "fast")),
        str(info.get("executor", "?")),
        int(info.get("workers", 0)),
        float(info.get("seconds", 0.0)),
        run.records,
        complete=info.get("complete") is True,
        interrupted=info.get("interrupted"),
        device=str(info.get("device", "cpu")),
    )


def check_junit_names(args: argparse.Namespace, suite: str) -> None:
    """``--junit-names pytorch`` names the tests of torch-opinfo, in a JUnit file."""
    if args.junit_names == "pytorch" and not args.junit:
        raise UsageError("--junit-names pytorch needs --junit FILE")
    if args.junit_names == "pytorch" and suite != DEFAULT_SUITE:
        raise UsageError(f"--junit-names pytorch names the tests of {DEFAULT_SUITE}, not of suite {suite!r}")


def write_files(args: argparse.Namespace, run, known=None) -> None:
    """The ``--junit`` and ``--html`` files of ``run`` (a loaded report), where ``args`` says;
    ``known``: its history (``--history``), whose trends the HTML report shows."""
    from distcheck.reports import html, junit, pytorch_junit

    if args.junit:
        junit.write_file(args.junit, run, pytorch_junit.write if args.junit_names == "pytorch" else junit.write)
        print(f"JUnit XML: {args.junit}")
    if args.html:
        html.write_file(args.html, run, trends_section(args, known))
        print(f"HTML report: {args.html}")
