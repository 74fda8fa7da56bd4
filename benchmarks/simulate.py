"""Predict a suite run's wall time on P workers from a recorded run, with a discrete-event model
of the Ray dispatcher (``benchmarks/sim/``) calibrated from measured costs
(``benchmarks/calibration.json``: each constant says where it was measured).

    .venv/bin/python benchmarks/simulate.py REPORT                      # P = 2, 8, 64, 256, 1024
    .venv/bin/python benchmarks/simulate.py REPORT --workers 64,256 --set driver_per_case=0.00037
    .venv/bin/python benchmarks/simulate.py --validate REPORT           # at the report's own workers
    .venv/bin/python benchmarks/simulate.py --validate REPLAY_REPORT --replay --scale 0.1
    .venv/bin/python benchmarks/simulate.py SLOW_GRAD_REPORT --nightly  # all four check kinds
    .venv/bin/python benchmarks/simulate.py REPORT --policy my_module:MyPolicy   # another order of work

REPORT is a JSON report of ``distcheck run --json``: per-case seconds, ``tasks`` > 1 marking a
split case (its work is its recorded estimate). For each P it prints the predicted wall time from
the first dispatch, the lower bound max(work / P, longest case that cannot be split, driver CPU),
their ratio (target ≤ 1.15), and where the difference goes (per worker: Ray's per-task overhead,
listings and split estimates; idle while work was still to come; idle in the tail).
``--validate`` compares the prediction at the report's worker count with its recorded wall time
(from the first dispatch when the report has it, else ``summary.seconds``: start-up included).
``--replay`` models the replay of the report (``distcheck/suites/replay.py``: no listings, tiny
Jacobians), every time multiplied by ``--scale``; ``--nightly`` the whole slow nightly built from
the slow grad suite's report (an estimate: see ``benchmarks/sim/nightly.py``; a report of the
whole nightly is used as it is). The work is ordered by the real policy objects
(``distcheck/runner/policy.py``): ``--policy`` takes what ``distcheck run --policy`` takes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.sim import calibration, nightly  # noqa: E402
from benchmarks.sim.model import Prediction, predict  # noqa: E402
from benchmarks.sim.workload import Workload, from_recording  # noqa: E402
from distcheck.runner.options import DEFAULT  # noqa: E402
from distcheck.runner.policy import load_policy  # noqa: E402
from distcheck.suites.base import UsageError  # noqa: E402
from distcheck.suites.replay import load  # noqa: E402

WORKERS = (2, 8, 64, 256, 1024)
HEADER = (
    f"{'P':>6} {'wall s':>10} {'bound s':>10} {'ratio':>6} {'work/P':>10} {'longest':>8} {'driver':>8}"
    f" {'overhd/P':>9} {'starv/P':>9} {'tail/P':>9} {'tasks':>8}"
)


def row(p: Prediction) -> str:
    per = p.workers
    return (
        f"{p.workers:>6} {p.wall:>10.2f} {p.bound:>10.2f} {p.ratio:>6.3f} {p.work / per:>10.2f} {p.longest:>8.2f}"
        f" {p.driver_cpu:>8.2f} {p.overhead / per:>9.3f} {p.starved / per:>9.3f} {p.tail / per:>9.3f} {p.tasks:>8}"
    )


def describe(workload: Workload, what: str) -> str:
    return (
        f"{what}: {workload.mode} mode, {workload.cases:,} runnable cases in {len(workload.groups):,} groups "
        f"({workload.split_cases} split), {workload.decided:,} decided without running; "
        f"{workload.total:,.1f} s of case work, longest unsplittable case {workload.longest:.2f} s"
    )


def recorded_wall(path: str) -> tuple[float, str]:
    """The recorded run's wall time from its first dispatch if the report says it, else whole."""
    with open(path) as f:
        summary = json.load(f)["summary"]
    first = summary.get("first_dispatch")
    if first is not None:
        return summary["seconds"] - first, "from the first dispatch"
    return summary["seconds"], "whole run, start-up included (the report has no first_dispatch)"


def parse_set(values: list[str]) -> dict[str, float]:
    constants = {}
    for text in values:
        name, sep, value = text.partition("=")
        if not sep:
            raise UsageError(f"--set expects NAME=VALUE, got {text!r}")
        try:
            constants[name] = float(value)
        except ValueError:
            raise UsageError(f"--set {name}: not a number: {value!r}") from None
    return constants


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("report", nargs="?", help="a JSON report of distcheck run --json")
    p.add_argument("--validate", metavar="REPORT", help="predict at REPORT's own workers and compare with its wall")
    p.add_argument("--wall", type=float, help="with --validate: the wall time to compare with (default: the report's)")
    p.add_argument("--workers", default=",".join(map(str, WORKERS)), help="comma-separated P (default: %(default)s)")
    p.add_argument("--calibration", default=calibration.DEFAULT, help="the constants' file")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override a constant")
    p.add_argument("--replay", action="store_true", help="model the replay of the report")
    p.add_argument("--scale", type=float, default=1.0, help="with --replay: every recorded time times this")
    p.add_argument("--suite-order", action="store_true", help="groups in suite order (no --durations)")
    p.add_argument("--policy", default=DEFAULT, help="the policy ordering the work, as distcheck run --policy")
    p.add_argument(
        "--nightly", action="store_true", help="the four check kinds, estimated from a slow grad-only report"
    )
    p.add_argument("--pytorch-hours", type=float, help="with --nightly: PyTorch's slow-gradcheck job, to compare")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    path = args.validate or args.report
    if path is None or (args.validate and args.report):
        parser().error("give one REPORT, or --validate REPORT")
    try:
        workers = tuple(int(w) for w in args.workers.split(","))
        if min(workers) < 1 or args.scale <= 0:
            raise ValueError
    except ValueError:
        parser().error("--workers: positive integers; --scale: a positive number")
    try:
        constants = calibration.load(args.calibration, replay=args.replay).with_values(parse_set(args.set))
        policy = load_policy(args.policy)
        recording = load(path)
    except (UsageError, ValueError, OSError) as e:
        print(f"simulate: error: {e}", file=sys.stderr)
        return 2
    estimated = args.nightly and {c.id.check for c in recording.cases} == {"grad"}
    if estimated:  # on P workers, a cluster of P times worker_memory
        by_workers = {
            p: nightly.nightly(recording, constants.split_seconds, p * constants.worker_memory, constants.block_bytes)
            for p in workers
        }
        workload = by_workers[max(workers)]
        print(describe(workload, "the whole slow nightly, ESTIMATED from the slow grad report (sim/nightly.py)"))
    else:
        workload = from_recording(recording, replay=args.replay, scale=args.scale)
        print(describe(workload, f"{'replay of ' if args.replay else ''}{path}"))
    durations = not args.suite_order
    if args.policy != DEFAULT:
        print(f"policy {args.policy}")
    if args.validate:
        return validate(workload, path, constants, durations, args.scale if args.replay else 1.0, args.wall, policy)
    print(HEADER)
    for p in workers:
        at_p = by_workers[p] if estimated else workload
        if at_p.decided != workload.decided:
            print(f"  (on {p} workers {at_p.decided - workload.decided:,} more cases over the cluster's memory)")
        prediction = predict(at_p, p, constants, durations, policy)
        print(row(prediction))
    if args.nightly and args.pytorch_hours:
        print(f"PyTorch's slow-gradcheck job: {args.pytorch_hours:g} h = {args.pytorch_hours * 3600:,.0f} s")
    print("columns: slot-seconds per worker of overhead (Ray per task, listings, split estimates), starved (idle")
    print("while work was still to come: driver, coordinators, listings) and tail (idle after a worker's last task)")
    return 0


def validate(
    workload: Workload, path: str, constants, durations: bool, scale: float, given: float | None, policy
) -> int:
    if workload.workers < 1:
        print("simulate: error: the report does not say its workers (summary.workers)", file=sys.stderr)
        return 2
    prediction = predict(workload, workload.workers, constants, durations, policy)
    wall, what = recorded_wall(path)
    wall *= scale
    if given is not None:
        wall, what = given, "as given (--wall)"
    print(HEADER)
    print(row(prediction))
    error = prediction.wall / wall - 1 if wall > 0 else float("nan")
    print(f"recorded wall time ({what}): {wall:.2f} s; predicted {prediction.wall:.2f} s: {error:+.1%}")
    print("target: within 10%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
