"""``distcheck run``: run a suite's checks, recorded in a run folder; ``--resume`` finishes an
interrupted run. Signals are handled by ``cli.signals``, the plan of a resumed run made by
:mod:`distcheck.cli.run_plan`."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from distcheck.cli.arguments import check_selected, positive, selection, selection_arguments, suite, suite_options
from distcheck.cli.history import check_store, of_run
from distcheck.cli.report import check_junit_names, report_options, write_files
from distcheck.records.listener import Listener
from distcheck.suites import UsageError, spec_of

RESUME_KEEPS = (
    "resume",
    "serial",
    "address",
    "json",
    "junit",
    "junit_names",
    "html",
    "history",
    "durations",
    "strict_flaky",
    "disabled_tests",
    "command",
    "func",
)  # options a resume may give


def _device(text: str) -> str:
    from distcheck.devices import DeviceError, parse_device

    try:
        return parse_device(text)
    except DeviceError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_parser(commands) -> None:
    run = commands.add_parser("run", help="run a suite's gradient checks", description="Run a suite's checks.")
    selection_arguments(run)
    where = run.add_mutually_exclusive_group()
    where.add_argument("--serial", action="store_true", help="run every case in this process, in order")
    where.add_argument(
        "--address",
        help="Ray cluster to use (default: a new local Ray on all cores): host:port or ray://host:port; 'auto' is "
        "Ray's own lookup: the cluster `ray start` began on this machine, else any Ray running here, another "
        "process's ray.init() session included",
    )
    run.add_argument(
        "--timeout",
        type=positive(float),
        default=600.0,
        metavar="S",
        help="stop a case after S seconds and report it 'timeout' (default 600; 0: no timeout)",
    )
    run.add_argument(
        "--max-jacobian-mb",
        type=positive(float),
        metavar="M",
        help="skip a slow-mode case whose Jacobians would need more than M MB (default: a quarter of this "
        "machine's RAM)",
    )
    run.add_argument(
        "--device",
        type=_device,
        default="cpu",
        help="where the samples are made and checked: cpu (default), cuda (on Ray: each runner's own GPU) or "
        "cuda:N (--serial); a device the machine or cluster lacks is an error before anything runs",
    )
    run.add_argument(
        "--gpus-per-runner",
        type=positive(float),
        default=1.0,
        metavar="F",
        help="with --device cuda on Ray: the GPUs each runner and chunk task asks for (default 1; 0.25 packs "
        "four runners on a GPU)",
    )
    run.add_argument(
        "--no-vectorize",
        dest="vectorize",
        action="store_false",
        help="slow mode: compute every Jacobian element by element, as torch (default: in batched blocks where "
        "they pay, each decided as torch would; see docs/architecture.md)",
    )
    run.add_argument("--json", metavar="FILE", help="also write a JSON report (summary and one record per case)")
    run.add_argument(
        "--durations",
        metavar="FILE",
        help="a previous run's JSON report (or run folder, or {case id: seconds}): on Ray, dispatch the "
        "longest groups and cases first",
    )
    run.add_argument(
        "--policy",
        default="default",
        metavar="NAME",
        help="on Ray, the order in which the work is handed out: a policy's name (default: costly cases "
        "first, groups, then batches; installed ones: entry points of group distcheck.policies) or "
        "MODULE:CLASS",
    )
    report_options(run)
    run.add_argument(
        "--out",
        metavar="DIR",
        help="the run folder, a path or an object store's URL (s3://bucket/runs/x): its options, every case record "
        "as it arrives (records.jsonl; in a store, a part records/part-N.jsonl every $DISTCHECK_SEGMENT_SECONDS, "
        "default 5) and at the end report.json (default: a new folder under runs/, named by suite, mode and UTC time)",
    )
    run.add_argument(
        "--resume",
        metavar="DIR",
        help="finish the interrupted run in DIR (a path or URL): same suite, selection and options; recorded cases "
        "are not run again",
    )
    run.add_argument(
        "--reruns",
        type=positive(int),
        default=0,
        metavar="N",
        help="run a failing, erroring or timed-out case again up to N times (fresh workers, same seeds): "
        "'flaky' if a rerun passes",
    )
    run.add_argument("--strict-flaky", action="store_true", help="flaky cases fail the run (exit status 1)")
    run.set_defaults(func=execute)


def execute(args: argparse.Namespace, argv: list[str]) -> int:
    from distcheck.cli.signals import StopOnSignal
    from distcheck.records.listener import Listeners
    from distcheck.reports import console, json_report
    from distcheck.reports.load import LoadedRun
    from distcheck.runner.run import run_suite
    from distcheck.storage import location
    from distcheck.storage.blocks import BlockStore
    from distcheck.storage.run_folder import REPORT

    plan = _plan(args, ["distcheck", *argv])
    _check_local_device(plan)
    with StopOnSignal(plan.options.serial) as stopper:
        try:
            listener = Listeners(plan.writer, _FolderShown(plan.folder), console.ConsoleProgress(), stopper)
            blocks = BlockStore(location.join(plan.folder, "blocks"))  # the run keeps its failure blocks
            result = run_suite(
                plan.suite,
                plan.selection,
                plan.options,
                listener,
                recorded=plan.recorded,
                stop=stopper.stop,
                blocks=blocks,
            )
        finally:
            plan.writer.close()
        result.interrupted = stopper.name
        origin = _origin(plan)
        resume = ["distcheck", "run", "--resume", str(plan.folder)]
        start = plan.start  # when it started, with what versions: known, not read back from the store
        info = json_report.report_summary(result, plan.command, resume, start, origin)
        loaded = LoadedRun(str(plan.folder), info, result.records, str(plan.folder))
        known = of_run(args, loaded)  # --history: the run added, its failures marked
        marks = known and known.marks(result.records)
        print(console.summary(result, args.strict_flaky, plan.folder, marks, spec_of(plan.suite)))
        reports = [location.join(plan.folder, REPORT), *([args.json] if args.json else [])]
        json_report.write(result, reports, summary=info)  # the text made once, of the summary above
        if args.json:
            print(f"JSON report: {args.json}")
        _write_reports(args, loaded, known)
        _shutdown_ray()
    if stopper.signum is not None:
        resume_it = console.resume_command(plan.folder)
        print(f"distcheck: stopped by {stopper.name}; resume with: {resume_it}", file=sys.stderr)
        return 128 + stopper.signum
    return 1 if result.failed or (args.strict_flaky and result.flaky) else 0


def _plan(args: argparse.Namespace, command: list[str]):
    """Check everything that can be checked before a case runs; open the run folder."""
    from distcheck.cli.run_plan import plan_new, plan_resume
    from distcheck.runner.options import RunOptions
    from distcheck.runner.policy import load_policy
    from distcheck.storage.durations import load_durations
    from distcheck.storage.run_folder import default_folder
    from distcheck.storage.writable import check_creatable, check_writable

    _check_conflicts(args)
    for path, what in ((args.json, "JSON report"), (args.junit, "JUnit XML"), (args.html, "HTML report")):
        if path:
            check_writable(path, what)
    check_store(args)
    if args.resume:
        return plan_resume(args.resume, args.serial, args.address, adapt=lambda s, made: _resumed(args, s, made))
    load_policy(args.policy)  # an unknown policy is an error before the run folder is made
    folder = args.out or default_folder(args.suite, args.mode)
    check_creatable(folder, "run folder")
    loaded = suite(args)
    check_junit_names(args, loaded.name)
    check_selected(loaded, selection(args), args.max_cases)
    options = RunOptions(
        serial=args.serial,
        address=args.address,
        timeout=args.timeout or None,
        max_jacobian_mb=args.max_jacobian_mb,
        max_cases=args.max_cases,
        reruns=args.reruns,
        durations=load_durations(args.durations) if args.durations else None,
        policy=args.policy,
        gpus_per_runner=args.gpus_per_runner,
        vectorize=args.vectorize,
    )
    return plan_new(loaded, args.suite, args.mode, selection(args), options, folder, command, suite_options(loaded))


def _check_local_device(plan) -> None:
    """A local Ray has this machine's devices: one it lacks is refused before Ray starts (a
    cluster's are known once joined)."""
    from distcheck.executors.ray_settings import resolve_address
    from distcheck.gpus import check_local

    if not plan.options.serial and resolve_address(plan.options.address) is None:
        check_local(getattr(plan.suite, "device", "cpu"))


def _resumed(args: argparse.Namespace, loaded, made: dict):
    """The suite a resume runs: ``loaded`` with the disabled tests its run recorded (``made``)."""
    from distcheck.suites.torch_opinfo.disabled import resumed

    check_junit_names(args, loaded.name)
    return resumed(loaded, made, args.disabled_tests)


def _check_conflicts(args: argparse.Namespace) -> None:
    if args.strict_flaky and not args.reruns and not args.resume:
        raise UsageError("--strict-flaky needs --reruns N (without reruns no case can be flaky)")
    if args.serial and args.policy != "default" and not args.resume:
        raise UsageError("--policy orders the work of a Ray run; --serial runs the cases in enumeration order")
    if args.resume:
        taken = [name for name in _given(args) if name not in RESUME_KEEPS]
        if taken:
            flags = ", ".join(_flag(name) for name in taken)
            raise UsageError(f"--resume takes the suite, selection and options from the run folder: drop {flags}")


def _given(args: argparse.Namespace) -> list[str]:
    """The ``run`` options given on the command line (those that differ from their default)."""
    top = argparse.ArgumentParser()
    add_parser(top.add_subparsers(dest="command"))
    defaults = vars(top.parse_args(["run"]))
    return [name for name, value in vars(args).items() if value != defaults.get(name)]


def _flag(name: str) -> str:
    """The flag that sets option ``name`` (``-k``: ``substring``; ``--no-vectorize``: ``vectorize``)."""
    return {"substring": "-k", "vectorize": "--no-vectorize"}.get(name, "--" + name.replace("_", "-"))


class _FolderShown(Listener):
    """Says where the run is recorded once the folder is there (the run folder's writer, told
    before it, makes it when the run starts)."""

    def __init__(self, folder: str | Path):
        self.folder = folder

    def started(self, result) -> None:
        print(f"distcheck: run folder {self.folder}", file=sys.stderr)


def _origin(plan) -> dict:
    """How the run's cases were chosen, for its reports: the suite's spec where it is not its name
    (``MODULE:NAME``), and the selection."""
    spec = spec_of(plan.suite)
    return {**({"spec": spec} if spec != plan.suite.name else {}), "selection": dataclasses.asdict(plan.selection)}


def _write_reports(args: argparse.Namespace, run, known) -> None:
    if args.junit or args.html:
        write_files(args, run, known)


def _shutdown_ray() -> None:
    """Stop the local Ray this run started, its spilled objects removed (or leave the cluster it
    joined) now, not at exit."""
    from distcheck.executors.ray_settings import stop_ray

    stop_ray()
