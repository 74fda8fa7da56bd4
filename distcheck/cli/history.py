"""``distcheck history STORE [RUN ...]``: add finished runs to the history store, print the
history (since when each case fails, how flaky it is, what got slower); and ``--history
STORE`` of ``run``, ``report`` and ``compare``: the reports of one run, knowing the history."""

from __future__ import annotations

import argparse
import sys

from distcheck.cli.arguments import check_kinds, names, positive
from distcheck.suites import MODES, UsageError


def add_parser(commands) -> None:
    from distcheck.history.cases import SLOWER, VERDICT_CHOICES, WINDOW
    from distcheck.history.render import FORMATS

    history = commands.add_parser(
        "history",
        help="the history of runs across nights: since when a case fails, how flaky, what got slower",
        description="Add finished runs (JSON reports or run folders) to the history store STORE (a folder, made if "
        "missing, or an fsspec URL such as s3://bucket/history; a run already there is not added again) and print "
        "the history of the cases failing, flaky or slower: their verdicts night by night (a night is the UTC date "
        "a run started), the first night of the current failure streak, the last night they passed and the "
        "library versions that changed between, the flaky rate, the last time against the median.",
    )
    history.add_argument("store", metavar="STORE", help="the history store: a folder or an fsspec URL")
    history.add_argument("runs", metavar="RUN", nargs="*", help="finished runs to add: JSON reports or run folders")
    history.add_argument("--format", choices=FORMATS, default="text", help="text (default), markdown or json")
    history.add_argument("--mode", choices=MODES, help="the runs of this mode (default: the latest run's)")
    history.add_argument("--suite", type=names, help="comma-separated suite names (default: every suite)")
    history.add_argument("--ops", type=names, help="comma-separated op names (default: every op)")
    history.add_argument("--checks", type=check_kinds, help="comma-separated check kinds (default: all)")
    history.add_argument(
        "--verdict",
        type=_verdicts(VERDICT_CHOICES),
        help=f"the cases whose latest verdict is one of these (comma-separated: {', '.join(VERDICT_CHOICES)}; "
        "failing: fail, error or timeout); default: the cases failing, flaky or slower",
    )
    history.add_argument("--all", action="store_true", help="every case (default: failing, flaky or slower)")
    history.add_argument("--nights", type=positive(int), metavar="N", help="only the last N nights")
    history.add_argument(
        "--slower",
        type=positive(float),
        default=SLOWER,
        metavar="FACTOR",
        help=f"a case is slower when its last time is over FACTOR × its median (default {SLOWER:g}) and 1 s more",
    )
    history.add_argument(
        "--window",
        type=positive(int),
        default=WINDOW,
        metavar="N",
        help=f"flaky: at least two of the last N nights (default {WINDOW}) flaky or flipped",
    )
    history.add_argument(
        "--junit-names",
        choices=("distcheck", "pytorch"),
        default="distcheck",
        help="distcheck (default): a line per case; pytorch: per PyTorch test of torch-opinfo "
        "(TestBwdGradientsCPU.test_fn_grad_sinh_cpu_float64), its samples' outcome",
    )
    history.add_argument("--html", metavar="FILE", help="also write the trends page (HTML, self-contained)")
    history.set_defaults(func=execute)


def _verdicts(choices: tuple[str, ...]):
    def parse(text: str) -> tuple[str, ...]:
        given = names(text)
        unknown = [v for v in given if v not in choices]
        if unknown or not given:
            shown = ", ".join(unknown)
            raise argparse.ArgumentTypeError(f"unknown verdict {shown!r} (choose from {', '.join(choices)})")
        return given

    return parse


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    from distcheck.history.cases import History, Thresholds
    from distcheck.history.night_run import from_loaded
    from distcheck.history.pytorch_tests import by_pytorch_test
    from distcheck.history.render import formatted
    from distcheck.history.store import HistoryStore
    from distcheck.history.table import Scope, build
    from distcheck.reports.load import load_run
    from distcheck.storage import location
    from distcheck.storage.writable import check_writable

    if args.verdict and args.all:
        raise UsageError("--verdict chooses cases, --all takes every case: give one of them")
    if args.html and not location.is_url(args.html):
        check_writable(args.html, "trends page")
    runs = [from_loaded(load_run(path)) for path in args.runs]  # every run checked before any is added
    store = HistoryStore(args.store, create=bool(runs))
    store.add(runs)
    scope = Scope(mode=args.mode, suites=args.suite, ops=args.ops, checks=args.checks, nights=args.nights)
    table = build(store, scope)
    if args.junit_names == "pytorch":
        table = by_pytorch_test(table)
    history = History(table, Thresholds(slower=args.slower, window=args.window))
    print(formatted(history, history.select(args.verdict, args.all), args.store, args.format))
    if args.html:
        from distcheck.reports import trends

        trends.write_file(args.html, history, args.store)
        print(f"trends page: {args.html}", file=sys.stderr)  # stdout: the history alone
    return 0


def history_option(parser: argparse.ArgumentParser) -> None:
    """``--history STORE`` of ``run`` and ``report``."""
    parser.add_argument(
        "--history",
        metavar="STORE",
        help="the history store (`distcheck history`): add the run to it (when finished), mark each failure in the "
        "summary as new, failing since NIGHT or flaky (k of the last n nights), and give --html a trends page",
    )


def check_store(args: argparse.Namespace) -> None:
    """Before a run: ``--history STORE`` is a store, or nothing yet (a run starts one)."""
    if getattr(args, "history", None):
        from distcheck.history.store import HistoryStore, NoHistoryStore

        try:
            HistoryStore(args.history)
        except NoHistoryStore:
            pass


def of_run(args: argparse.Namespace, run):
    """With ``--history STORE``: ``run`` (a loaded run) added to the store if it is finished,
    and its history (:class:`distcheck.history.marks.RunHistory`); None without."""
    if not getattr(args, "history", None):
        return None
    from distcheck.history.marks import run_history

    found = run_history(args.history, run, add=True)
    print(found.note, file=sys.stderr)
    return found


def trends_section(args: argparse.Namespace, found) -> str:
    """The trends section of a run's HTML report (``found``: :func:`of_run`'s history)."""
    if found is None:
        return ""
    from distcheck.reports import trends

    return trends.section(found.history, args.history)
