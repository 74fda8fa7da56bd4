"""The command line: ``distcheck run`` runs a suite, ``distcheck list`` lists its case ids.

    distcheck run --suite torch-opinfo --checks grad,gradgrad          # local Ray, all cores
    distcheck run --ops nn.functional.conv2d --mode slow --serial      # in this process
    distcheck list --ops add --checks grad
    distcheck compare last-night/ tonight/ --format markdown     # what changed between two runs
    distcheck repro 'torch-opinfo::mm::complex128::sample0::grad' > repro.py   # one case, standalone
    distcheck report tonight/ --html report.html --junit junit.xml             # reports of a past run

Exit status: 0 when every case passed (or was skipped / expected to fail), 1 when a case
failed, errored or timed out, 2 for usage errors (unknown suite, check, dtype or op names,
nothing selected). ``compare`` exits 1 when NEW has a new failure (see ``--fail-on``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile

from distcheck.runner import hash_seed
from distcheck.suites import CHECK_KINDS, MODES, Selection, UsageError, get_suite, suite_sources

USAGE_ERROR = 2
DEFAULT_SUITE = "torch-opinfo"


def _names(text: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _check_kinds(text: str) -> tuple[str, ...]:
    kinds = _names(text)
    for kind in kinds:
        if kind not in CHECK_KINDS:
            raise argparse.ArgumentTypeError(f"unknown check kind {kind!r} (choose from {', '.join(CHECK_KINDS)})")
    if not kinds:
        raise argparse.ArgumentTypeError("no check kind given")
    return kinds


def _positive(kind: type):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value < 0:
            raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
        return value

    return parse


def _selection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--suite",
        default=DEFAULT_SUITE,
        metavar="SUITE",
        help=f"a suite's name (`distcheck list --suites`; default {DEFAULT_SUITE}) or MODULE:NAME (a suite in any "
        "importable module: a Suite class, a factory taking the mode, or a suite object)",
    )
    parser.add_argument(
        "--mode",
        choices=MODES,
        default="fast",
        help="fast (default: fast-mode gradcheck, as PyTorch's CI) or slow (full Jacobians, small "
        "samples, as PyTorch's periodic slow-gradcheck job)",
    )
    parser.add_argument(
        "--checks",
        type=_check_kinds,
        default=CHECK_KINDS,
        help=f"comma-separated check kinds (default: all of {','.join(CHECK_KINDS)})",
    )
    parser.add_argument("--ops", type=_names, help="comma-separated op names (default: every op)")
    parser.add_argument("--dtypes", type=_names, help="comma-separated dtypes (default: float64,complex128)")
    parser.add_argument("-k", dest="substring", metavar="SUBSTRING", help="only case ids containing SUBSTRING")
    parser.add_argument("--max-cases", type=_positive(int), metavar="N", help="only the first N cases")


def parser() -> argparse.ArgumentParser:
    import distcheck

    top = argparse.ArgumentParser(prog="distcheck", description="Distributed gradient checking of operator suites.")
    top.add_argument("--version", action="version", version=f"distcheck {distcheck.__version__}")
    commands = top.add_subparsers(dest="command", required=True, metavar="{run,list,compare,repro,report}")

    run = commands.add_parser("run", help="run a suite's gradient checks", description="Run a suite's checks.")
    _selection_arguments(run)
    where = run.add_mutually_exclusive_group()
    where.add_argument("--serial", action="store_true", help="run every case in this process, in order")
    where.add_argument(
        "--address",
        help="Ray cluster to use (default: a new local Ray on all cores; 'auto': the one started on this "
        "machine with `ray start`; host:port)",
    )
    run.add_argument(
        "--timeout",
        type=_positive(float),
        default=600.0,
        metavar="S",
        help="stop a case after S seconds and report it 'timeout' (default 600; 0: no timeout)",
    )
    run.add_argument(
        "--max-jacobian-mb",
        type=_positive(float),
        metavar="M",
        help="skip a slow-mode case whose Jacobians would need more than M MB (default: a quarter of this "
        "machine's RAM)",
    )
    run.add_argument("--json", metavar="FILE", help="also write a JSON report (summary and one record per case)")
    run.add_argument(
        "--durations",
        metavar="FILE",
        help="a previous run's JSON report (or run folder, or {case id: seconds}): on Ray, dispatch the "
        "longest groups and cases first",
    )
    _report_options(run)

    listing = commands.add_parser("list", help="list a suite's case ids", description="List a suite's case ids.")
    _selection_arguments(listing)
    _suites_argument(listing)
    _report_commands(commands)
    return top


def _suites_argument(listing: argparse.ArgumentParser) -> None:
    listing.add_argument(
        "--suites", action="store_true", help="list the suites instead (built-in and installed), with their origin"
    )


def _list_suites() -> int:
    """Every suite ``--suite`` takes by name, where it comes from, and what it loads (nothing
    is imported: a broken plugin shows up here and fails only when it is used)."""
    sources = suite_sources()
    width = max(len(source.name) for source in sources)
    for source in sources:
        print(f"{source.name:<{width}}  {source.origin} ({source.target})")
    return 0


def _selection(args: argparse.Namespace) -> Selection:
    return Selection(checks=args.checks, dtypes=args.dtypes, ops=args.ops, substring=args.substring)


def _list(args: argparse.Namespace) -> int:
    from distcheck.runner import select

    if args.suites:
        return _list_suites()
    count = 0
    for case in select(get_suite(args.suite, args.mode), _selection(args), args.max_cases):
        count += 1
        status = "" if case.status == "run" else f"\t[{case.status}] {case.reason}"
        print(f"{case.key}{status}")
    if not count:
        print("distcheck: no case matches the selection", file=sys.stderr)
        return USAGE_ERROR
    return 0


def _run(args: argparse.Namespace, argv: list[str]) -> int:
    with _blocks_kept(args) as blocks_folder:
        return _run_suite(args, argv, blocks_folder)


def _run_suite(args: argparse.Namespace, argv: list[str], blocks_folder: str | None) -> int:
    from distcheck.reports import console, json_report
    from distcheck.runner import RunOptions, run_suite
    from distcheck.runner.durations import load_durations

    options = RunOptions(
        serial=args.serial,
        address=args.address,
        timeout=args.timeout or None,
        max_jacobian_mb=args.max_jacobian_mb,
        max_cases=args.max_cases,
        durations=load_durations(args.durations) if args.durations else None,
    )
    suite = get_suite(args.suite, args.mode)
    result = run_suite(suite, _selection(args), options, console.ConsoleProgress())
    if not result.records:
        print("distcheck: no case matches the selection", file=sys.stderr)
        return USAGE_ERROR
    print(console.summary(result))
    if args.json:
        json_report.write(result, args.json, ["distcheck", *argv])
        print(f"JSON report: {args.json}")
    _write_reports(args, argv, result, blocks_folder)
    return 1 if result.failed else 0


def main(argv: list[str] | None = None) -> int:
    """The command line. Started as a command (no ``argv``), it first makes sure that it runs
    with the run's string-hash seed, re-executing itself if needed (see ``runner.hash_seed``)."""
    if argv is None:
        if not hash_seed.is_fixed():
            hash_seed.reexec(["-m", "distcheck", *sys.argv[1:]])
        argv = sys.argv[1:]
    args = parser().parse_args(argv)
    try:
        if args.command == "list":
            return _list(args)
        if args.command in ("compare", "repro", "report"):
            return _report_command(args)
        return _run(args, argv)
    except UsageError as e:
        print(f"distcheck: error: {e}", file=sys.stderr)
        return USAGE_ERROR
    except ImportError as e:
        print(
            f"distcheck: error: {getattr(args, 'suite', None) or 'this command'!r} needs a library that is not "
            f"installed: {e}",
            file=sys.stderr,
        )
        return USAGE_ERROR
    except KeyboardInterrupt:
        print("\ndistcheck: interrupted", file=sys.stderr)
        return 130


# -- reports: compare, repro, report; --junit / --html of a run -----------------------------


def _report_options(run: argparse.ArgumentParser) -> None:
    run.add_argument("--junit", metavar="FILE", help="also write JUnit XML (as pytest's xunit2) for a CI dashboard")
    run.add_argument(
        "--html",
        metavar="FILE",
        help="also write an HTML report (one self-contained file: summary, filterable cases, heatmaps of failures)",
    )


def _report_commands(commands) -> None:
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
    repro = commands.add_parser(
        "repro",
        help="print a standalone script that reproduces one case",
        description="Print a Python script that rebuilds a case's inputs as the run did and makes its "
        "gradcheck / gradgradcheck calls with the case's exact options.",
    )
    repro.add_argument("case", metavar="CASE_ID", help="suite::op::dtype::sampleN::check (the suite part optional)")
    repro.add_argument("--suite", help="the suite, when CASE_ID has none (default torch-opinfo)")
    repro.add_argument("--mode", choices=MODES, default="fast", help="the run's mode (default fast)")
    report = commands.add_parser(
        "report",
        help="JUnit XML and HTML reports of a past run",
        description="Write the reports of a past run (a JSON report or a run folder).",
    )
    report.add_argument("path", metavar="RUN", help="a JSON report or a run folder")
    _report_options(report)


@contextlib.contextmanager
def _blocks_kept(args: argparse.Namespace):
    """Where a run keeps its failure blocks: the run folder's ``blocks/`` (``--out``), else a
    temporary folder while the HTML report needs them, else nowhere. Yields the folder holding
    ``blocks/`` (or None)."""
    from distcheck.runner import artifacts

    out = getattr(args, "out", None)
    if out is None and not args.html:
        yield None
        return
    with contextlib.ExitStack() as stack:
        folder = out if out is not None else stack.enter_context(tempfile.TemporaryDirectory(prefix="distcheck-"))
        stack.enter_context(artifacts.storing(os.path.join(folder, "blocks")))
        yield folder


def _write_reports(args: argparse.Namespace, argv: list[str], result, blocks_folder: str | None) -> None:
    if not (args.junit or args.html):
        return
    from distcheck.reports import json_report
    from distcheck.reports.load import LoadedRun

    info = json_report.report(result, ["distcheck", *argv])["summary"]
    _write_files(args, LoadedRun(getattr(args, "out", None) or "this run", info, result.records, blocks_folder))


def _write_files(args: argparse.Namespace, run) -> None:
    from distcheck.reports import html, junit

    if args.junit:
        junit.write_file(args.junit, run)
        print(f"JUnit XML: {args.junit}")
    if args.html:
        html.write_file(args.html, run)
        print(f"HTML report: {args.html}")


def _report_command(args: argparse.Namespace) -> int:
    from distcheck.reports import compare, repro
    from distcheck.reports.load import load_run

    if args.command == "repro":
        print(repro.reproducer(args.case, args.suite, args.mode), end="")
        return 0
    if args.command == "report":
        if not (args.junit or args.html):
            raise UsageError("nothing to write: give --junit FILE and/or --html FILE")
        _write_files(args, load_run(args.path))
        return 0
    comparison = compare.compare(load_run(args.old), load_run(args.new))
    print(compare.formatted(comparison, args.format))
    return comparison.exit_status(args.fail_on)
