"""The command line: ``distcheck run`` runs a suite, ``distcheck list`` lists its case ids.

    distcheck run --suite torch-opinfo --checks grad,gradgrad          # local Ray, all cores
    distcheck run --ops nn.functional.conv2d --mode slow --serial      # in this process
    distcheck list --ops add --checks grad
    distcheck run --resume runs/torch-opinfo-fast-20261201T030000Z   # finish an interrupted run
    distcheck compare last-night/ tonight/ --format markdown     # what changed between two runs
    distcheck repro 'torch-opinfo::mm::complex128::sample0::grad' > repro.py   # one case, standalone
    distcheck report tonight/ --html report.html --junit junit.xml             # reports of a past run

Exit status: 0 when every case passed (or was skipped / expected to fail, or was flaky without
``--strict-flaky``), 1 when a case failed, errored or timed out, 2 for usage errors (unknown
suite, check, dtype or op names, nothing selected, unwritable outputs, an unreachable cluster,
a run folder that cannot be resumed, conflicting options), 130 / 143 when SIGINT / SIGTERM
stopped the run (its partial report written, the command that resumes it printed).
``compare`` exits 1 when NEW has a new failure (see ``--fail-on``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import signal
import sys
import threading
from pathlib import Path

from distcheck.runner import hash_seed
from distcheck.runner.runner import Listener, Listeners
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
    parser.add_argument(
        "--disabled-tests",
        metavar="FILE",
        help="PyTorch's disabled-tests JSON (.pytorch-disabled-tests.json): the cases of those tests are skipped, "
        "with their issue (torch-opinfo)",
    )


def parser() -> argparse.ArgumentParser:
    import distcheck

    top = argparse.ArgumentParser(prog="distcheck", description="Distributed gradient checking of operator suites.")
    top.add_argument("--version", action="version", version=f"distcheck {distcheck.__version__}")
    commands = top.add_subparsers(dest="command", required=True, metavar="{run,list}")

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
    _durability_arguments(run)

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


def _suite(args: argparse.Namespace):
    """The suite to run or list, with ``--disabled-tests`` skipped."""
    suite = get_suite(args.suite, args.mode)
    if args.disabled_tests:
        from distcheck.suites.torch_opinfo.disabled import with_disabled_tests

        return with_disabled_tests(suite, args.disabled_tests)
    return suite


def _selection(args: argparse.Namespace) -> Selection:
    return Selection(checks=args.checks, dtypes=args.dtypes, ops=args.ops, substring=args.substring)


def _list(args: argparse.Namespace) -> int:
    from distcheck.runner import select

    if args.suites:
        return _list_suites()
    count = 0
    try:
        for case in select(_suite(args), _selection(args), args.max_cases):
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


def _run(args: argparse.Namespace, argv: list[str]) -> int:
    from distcheck.reports import console, json_report
    from distcheck.runner import run_suite
    from distcheck.runner.store import REPORT

    plan = _plan_run(args, ["distcheck", *argv])
    print(f"distcheck: run folder {plan.folder}", file=sys.stderr)
    with _StopOnSignal(plan.options.serial) as stopper, _blocks_kept(plan.folder):
        try:
            listener = Listeners(plan.listener(), stopper)
            recorded = plan.recorded
            result = run_suite(plan.suite, plan.selection, plan.options, listener, recorded=recorded, stop=stopper.stop)
        finally:
            plan.writer.close()
        result.interrupted = stopper.name
        print(console.summary(result, args.strict_flaky, plan.folder))
        resume = ["distcheck", "run", "--resume", str(plan.folder)]
        reports = [str(plan.folder / REPORT), *([args.json] if args.json else [])]
        json_report.write(result, reports, plan.command, resume)  # the text made once
        if args.json:
            print(f"JSON report: {args.json}")
        _write_reports(args, plan.command, result, str(plan.folder))
        _shutdown_ray()
    if stopper.signum is not None:
        resume_it = console.resume_command(plan.folder)
        print(f"distcheck: stopped by {stopper.name}; resume with: {resume_it}", file=sys.stderr)
        return 128 + stopper.signum
    return 1 if result.failed or (args.strict_flaky and result.flaky) else 0


# -- durability: the run folder, resume, reruns, signals (see distcheck.runner.store) ------------------

RESUME_KEEPS = (
    "resume",
    "serial",
    "address",
    "json",
    "junit",
    "junit_names",
    "html",
    "durations",
    "strict_flaky",
    "command",
)  # options a resume may give


def _durability_arguments(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--out",
        metavar="DIR",
        help="the run folder: its options, every case record as it arrives (records.jsonl) and at the end "
        "report.json (default: a new folder under runs/, named by suite, mode and UTC time)",
    )
    run.add_argument(
        "--resume",
        metavar="DIR",
        help="finish the interrupted run in DIR: same suite, selection and options; recorded cases are not run again",
    )
    run.add_argument(
        "--reruns",
        type=_positive(int),
        default=0,
        metavar="N",
        help="run a failing, erroring or timed-out case again up to N times (fresh workers, same seeds): "
        "'flaky' if a rerun passes",
    )
    run.add_argument("--strict-flaky", action="store_true", help="flaky cases fail the run (exit status 1)")


@dataclasses.dataclass
class _Plan:
    """A run, ready to start: everything checked, its folder open for writing."""

    suite: object
    selection: Selection
    options: object
    folder: Path
    writer: object
    recorded: list
    command: list[str]

    def listener(self):
        from distcheck.reports import console

        return Listeners(self.writer, console.ConsoleProgress())


def _given(args: argparse.Namespace) -> list[str]:
    """The ``run`` options given on the command line (those that differ from their default)."""
    defaults = vars(parser().parse_args(["run"]))
    return [name for name, value in vars(args).items() if value != defaults.get(name)]


def _check_conflicts(args: argparse.Namespace) -> None:
    if args.strict_flaky and not args.reruns and not args.resume:
        raise UsageError("--strict-flaky needs --reruns N (without reruns no case can be flaky)")
    if args.resume:
        taken = [name for name in _given(args) if name not in RESUME_KEEPS]
        if taken:
            flags = ", ".join("--" + name.replace("_", "-") if name != "substring" else "-k" for name in taken)
            raise UsageError(f"--resume takes the suite, selection and options from the run folder: drop {flags}")


def _plan_run(args: argparse.Namespace, command: list[str]) -> _Plan:
    """Check everything that can be checked before a case runs; open the run folder."""
    from distcheck.runner import RunOptions
    from distcheck.runner.durations import load_durations
    from distcheck.runner.preflight import check_reachable, check_writable
    from distcheck.runner.store import RunWriter, check_new_folder, check_resumable, default_folder, read_run, run_start

    _check_conflicts(args)
    for path, what in ((args.json, "JSON report"), (args.junit, "JUnit XML"), (args.html, "HTML report")):
        if path:
            check_writable(path, what)
    if args.resume:
        log = read_run(args.resume)
        suite = get_suite(log.start["suite"], log.start["mode"])
        _check_junit_names(args, suite.name)
        check_resumable(log, suite.name)
        recorded = log.start["options"]
        serial = args.serial or (args.address is None and bool(recorded.get("serial")))
        address = args.address if args.address is not None or serial else recorded.get("address")
        options = log.options(serial=serial, address=address)
        check_reachable(None if serial else options.address)
        writer = RunWriter(log.folder, None, {r.id for r in log.records})
        return _Plan(suite, log.selection, options, log.folder, writer, log.records, log.start["command"])
    suite = _suite(args)
    _check_junit_names(args, suite.name)
    options = RunOptions(
        serial=args.serial,
        address=args.address,
        timeout=args.timeout or None,
        max_jacobian_mb=args.max_jacobian_mb,
        max_cases=args.max_cases,
        reruns=args.reruns,
        durations=load_durations(args.durations) if args.durations else None,
    )
    check_reachable(None if args.serial else options.address)
    folder = check_new_folder(args.out or default_folder(args.suite, args.mode))
    selection = _selection(args)
    writer = RunWriter(folder, run_start(args.suite, args.mode, selection, options, command))
    return _Plan(suite, selection, options, folder, writer, [], command)


class _StopOnSignal(Listener):
    """SIGINT and SIGTERM stop the run (``stop`` is set; a serial run's case is interrupted,
    and only a case: the signal may come while the report is written); a second one exits at
    once (the streamed records are intact: each line is flushed whole). A listener of the run:
    when it starts, the handlers are set again (``ray.init`` replaces the SIGTERM handler)."""

    def __init__(self, serial: bool):
        self.serial = serial
        self.stop = threading.Event()
        self.signum: int | None = None
        self._previous: dict[int, object] = {}
        self._started: list[int] = []

    @property
    def name(self) -> str | None:
        return None if self.signum is None else signal.Signals(self.signum).name

    def __enter__(self) -> _StopOnSignal:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def started(self, result) -> None:
        if self._previous and threading.current_thread() is threading.main_thread():
            for signum in self._previous:
                signal.signal(signum, self._handle)

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame) -> None:
        from distcheck.runner.runner import Interrupted

        if self.signum is not None:
            _kill(self._started)
            os._exit(128 + signum)
        self._started = _descendants(os.getpid())  # now, before Ray's shutdown orphans some of them
        self.signum = signum
        self.stop.set()
        print(
            f"\ndistcheck: {self.name}: stopping (cancelling the running cases, writing the partial report); "
            "press Ctrl-C again to exit at once",
            file=sys.stderr,
            flush=True,
        )
        if self.serial and _in_serial_dispatch(frame):
            raise Interrupted


def _in_serial_dispatch(frame) -> bool:
    """Whether ``frame`` (where a signal interrupted this thread) is inside the serial dispatcher."""
    from distcheck.runner.serial import SerialDispatcher

    while frame is not None:
        if frame.f_code is SerialDispatcher.run.__code__:
            return True
        frame = frame.f_back
    return False


def _shutdown_ray() -> None:
    """Stop the local Ray this run started (or leave the cluster it joined) now, not at exit."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


def _kill(pids: list[int]) -> None:
    """SIGKILL ``pids``: the processes this one started, and theirs, when the first signal came
    (a local Ray: GCS, raylet, its agents and workers; a joined cluster's are not ours), so that
    exiting at once leaves none behind. A forked child kills them while this process exits:
    Ray's core worker ends its process with status 1 the moment its raylet dies."""
    if pids and os.fork() == 0:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        os._exit(0)


def _descendants(root: int) -> list[int]:
    """The processes ``root`` started, and theirs (found through /proc: Linux; else none)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: Python's flush at exit would raise BrokenPipeError again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


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
    except ConnectionError as e:  # joining the cluster failed (ensure_ray explains why)
        print(f"distcheck: error: {e}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:
        print("\ndistcheck: interrupted", file=sys.stderr)
        return 130


# -- reports: compare, repro, report; --junit / --html of a run -----------------------------


def _report_options(run: argparse.ArgumentParser) -> None:
    run.add_argument("--junit", metavar="FILE", help="also write JUnit XML (as pytest's xunit2) for a CI dashboard")
    run.add_argument(
        "--junit-names",
        choices=("distcheck", "pytorch"),
        default="distcheck",
        help="distcheck (default): a testcase per case; pytorch: a testcase per PyTorch test of torch-opinfo "
        "(TestBwdGradientsCPU.test_fn_grad_sinh_cpu_float64), the outcome of all its samples",
    )
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
def _blocks_kept(folder: Path):
    """A run keeps its failure blocks in its run folder's ``blocks/``."""
    from distcheck.runner import artifacts

    with artifacts.storing(os.path.join(folder, "blocks")):
        yield


def _check_junit_names(args: argparse.Namespace, suite: str) -> None:
    if args.junit_names == "pytorch" and not args.junit:
        raise UsageError("--junit-names pytorch needs --junit FILE")
    if args.junit_names == "pytorch" and suite != DEFAULT_SUITE:
        raise UsageError(f"--junit-names pytorch names the tests of {DEFAULT_SUITE}, not of suite {suite!r}")


def _write_reports(args: argparse.Namespace, command: list[str], result, folder: str) -> None:
    if not (args.junit or args.html):
        return
    from distcheck.reports import json_report
    from distcheck.reports.load import LoadedRun

    info = json_report.report(result, command)["summary"]
    _write_files(args, LoadedRun(folder, info, result.records, folder))


def _write_files(args: argparse.Namespace, run) -> None:
    from distcheck.reports import html, junit

    if args.junit:
        junit.write_file(args.junit, run, args.junit_names)
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
        run = load_run(args.path)
        _check_junit_names(args, str(run.info.get("suite", "")))
        _write_files(args, run)
        return 0
    comparison = compare.compare(load_run(args.old), load_run(args.new))
    print(compare.formatted(comparison, args.format))
    return comparison.exit_status(args.fail_on)
