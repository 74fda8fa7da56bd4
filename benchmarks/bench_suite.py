"""The torch-opinfo suite timed side by side in one run, on exactly the same cases:

(a) the reference: a serial loop of ``torch.autograd.gradcheck`` on one thread over the cases
    distcheck runs (same ids, same rebuilt inputs, same options, same RNG seeds; a slow-mode case
    over the memory budget is skipped by both, from the same size estimate);
(b) ``distcheck run`` on Ray (``--distcheck ray``, the default): a local Ray on every core of
    this machine, started as ``distcheck run`` starts it (Ray's start included), or the Ray at
    ``--address`` (started beforehand, so that the driver's CPU is measured alone);
(c) ``distcheck run --serial`` (``--distcheck serial``): every case in this process, on one
    thread — its per-case time against torch's is the *serial per-case ratio*.

The default cases are ``make check-local``'s (fast mode, grad and gradgrad, float64 and
complex128). Prints the wall times, their ratio and the per-case verdict agreement, with the
machine's load average before and after (the machine may be shared: the load says how much to
trust a ratio), then where distcheck's time goes: per-case seconds of both (overall, per check
kind × dtype, for the cases under 5 ms of torch time), the ops that cost the most extra, the
driver's CPU, Ray's start and the Ray/driver overhead (wall × workers − Σ case seconds).
Formerly ``bench_opinfo_slow.py`` (``--mode slow --checks grad`` is that benchmark).

    .venv/bin/python benchmarks/bench_suite.py                               # check-local's cases
    .venv/bin/python benchmarks/bench_suite.py --mode slow --checks grad     # the slow-gradcheck job
    .venv/bin/python benchmarks/bench_suite.py --ops add,linalg.svd --distcheck serial
    .venv/bin/python benchmarks/bench_suite.py --address auto --json bench.json
    .venv/bin/python benchmarks/bench_suite.py --torch-after    # torch's loop before and after distcheck

This machine's speed drifts by more than the differences measured (torch's own loop over the same
cases took 306.6-457.4 s on one day), and the runs come one after the other. ``--torch-after``
runs torch's loop a second time after distcheck's runs: the ratios are then against the mean of
the two loops (each case's torch time is the mean of its two), which cancels a drift that is
linear over the run; both loops' times and their spread are printed.

Targets: identical verdicts on every case; on Ray, a ratio of at least 0.9 × cores; serial
per-case ratio (Σ distcheck case seconds / Σ torch case seconds) at most 1.0.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import sys
import time
import warnings
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ray  # noqa: E402
import torch  # noqa: E402

from distcheck import hash_seed
from distcheck.case.budget import SKIP, Budget, default_max_jacobian_mb, estimate, has_slow_calls  # noqa: E402
from distcheck.case.first_failure import Stops  # noqa: E402
from distcheck.case.judge import judge  # noqa: E402
from distcheck.executors.ray_executor import ensure_ray, local_cpus  # noqa: E402
from distcheck.records.case_record import CaseRecord  # noqa: E402
from distcheck.reports import json_report  # noqa: E402
from distcheck.reports.console import ConsoleProgress, summary  # noqa: E402
from distcheck.runner import RunOptions, run_suite  # noqa: E402
from distcheck.runner.run import select  # noqa: E402
from distcheck.suites import Selection, UsageError, get_suite  # noqa: E402
from distcheck.suites.checkers import torch_checker  # noqa: E402

SUITE = "torch-opinfo"
QUICK = 0.005  # seconds of torch time: a "small" case, where per-case overhead decides


def mean_reference(
    before: dict[str, CaseRecord], after: dict[str, CaseRecord]
) -> tuple[dict[str, CaseRecord], list[str]]:
    """Each case's record of torch's first loop with the mean of its two loops' seconds; the
    keys whose two verdicts differ (torch against itself: a flaky case)."""
    mean, flaky = {}, []
    for key, first in before.items():
        second = after.get(key)
        if second is None or second.verdict != first.verdict:
            flaky.append(key)
        seconds = first.seconds if second is None else (first.seconds + second.seconds) / 2
        mean[key] = dataclasses.replace(first, seconds=seconds)
    return mean, flaky


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def reference_loop(
    mode: str, selection: Selection, budget: Budget, max_cases: int | None
) -> tuple[dict[str, CaseRecord], float]:
    """torch.autograd.gradcheck over the selected cases, one after the other, on one thread; a
    test expected to fail stops at its first failing sample, as PyTorch's test does."""
    torch.set_num_threads(1)
    suite = get_suite(SUITE, mode)
    checker = torch_checker()
    stops = Stops()
    records: dict[str, CaseRecord] = {}
    start = time.perf_counter()
    progress = time.monotonic()
    for info in select(suite, selection, max_cases):
        if info.status != "run":
            records[info.key] = CaseRecord(info.id, info.status, info.reason)
            continue
        if (not_run := stops.skipped(info.id)) is not None:
            records[info.key] = not_run
            continue
        began = time.perf_counter()
        built = suite.build(info.id)
        verdict, message = None, ""
        if has_slow_calls(built):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    decision, reason = budget.decide(estimate(built))
            except Exception:  # the function fails: gradcheck will say how
                decision = None
            if decision == SKIP:
                verdict, message = "skipped", reason
        if verdict is None:
            verdict, message = judge(built, checker)
            stops.note(info.id, verdict)
        records[info.key] = CaseRecord(info.id, verdict, message, time.perf_counter() - began, 1)
        if time.monotonic() - progress > 30:
            progress = time.monotonic()
            print(f"  torch loop: {len(records)} cases, {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return records, time.perf_counter() - start


@dataclass
class DistcheckRun:
    """One ``distcheck run`` of the cases: its records by key, wall time, workers, driver CPU
    (``time.process_time`` across the run, Ray's start excluded) and Ray's start."""

    name: str
    records: dict[str, CaseRecord]
    seconds: float
    workers: int
    driver_cpu: float
    ray_start: float | None = None


def distcheck_on_ray(mode: str, selection: Selection, options: RunOptions, report: str | None) -> DistcheckRun:
    start = time.perf_counter()
    try:
        ensure_ray(options.address, {"env_vars": dict(hash_seed.ENV)})  # as `distcheck run` starts or joins it
        ray_start = time.perf_counter() - start
        cpu = time.process_time()
        result = run_suite(get_suite(SUITE, mode), selection, options, ConsoleProgress())
        cpu = time.process_time() - cpu
        seconds = time.perf_counter() - start
    finally:
        ray.shutdown()
    print(summary(result))
    if report:
        json_report.write(result, report, ["benchmarks/bench_suite.py", *sys.argv[1:]])
    if result.first_dispatch is not None:
        print(f"first dispatch {result.first_dispatch:.1f} s after the run's start (enumeration, warm workers)")
    return DistcheckRun("ray", {r.id: r for r in result.records}, seconds, result.workers, cpu, ray_start)


def distcheck_serial(mode: str, selection: Selection, options: RunOptions) -> DistcheckRun:
    torch.set_num_threads(1)
    start, cpu = time.perf_counter(), time.process_time()
    result = run_suite(get_suite(SUITE, mode), selection, options, ConsoleProgress())
    cpu, seconds = time.process_time() - cpu, time.perf_counter() - start
    print(summary(result))
    return DistcheckRun("serial", {r.id: r for r in result.records}, seconds, 1, cpu)


# -- where the time goes -------------------------------------------------------------------


def timed_pairs(reference: dict[str, CaseRecord], run: DistcheckRun) -> list[tuple[CaseRecord, CaseRecord]]:
    """(torch, distcheck) records of the cases both ran (not skipped / xfail by either)."""
    pairs = []
    for key, theirs in reference.items():
        ours = run.records.get(key)
        if ours is not None and theirs.tasks and ours.tasks:
            pairs.append((theirs, ours))
    return pairs


def sums_line(label: str, pairs: list[tuple[CaseRecord, CaseRecord]]) -> str:
    torch_s = sum(t.seconds for t, _ in pairs)
    ours_s = sum(o.seconds for _, o in pairs)
    ratio = f"{ours_s / torch_s:5.2f}x" if torch_s else "    -"
    extra = (ours_s - torch_s) / len(pairs) * 1000 if pairs else 0.0
    seconds = f"torch {torch_s:8.1f} s  distcheck {ours_s:8.1f} s"
    return f"  {label:<34} {len(pairs):7,} cases  {seconds}  {ratio}  ({extra:+.2f} ms a case)"


def breakdown(reference: dict[str, CaseRecord], run: DistcheckRun) -> dict:
    """Print where distcheck's time goes against torch's; return the figures for the JSON."""
    pairs = timed_pairs(reference, run)
    torch_s = sum(t.seconds for t, _ in pairs)
    ours_s = sum(o.seconds for _, o in pairs)
    print(f"where distcheck's time goes ({run.name}): per-case seconds, torch vs distcheck")
    print(sums_line("all cases", pairs))
    groups = collections.defaultdict(list)
    for t, o in pairs:
        groups[(o.case.check, o.case.dtype)].append((t, o))
    for (check, dtype), group in sorted(groups.items()):
        print(sums_line(f"{check} {dtype}", group))
    quick = [(t, o) for t, o in pairs if t.seconds < QUICK]
    print(sums_line(f"under {QUICK * 1000:g} ms of torch time", quick))
    extra = collections.Counter()
    for t, o in pairs:
        extra[o.case.op] += o.seconds - t.seconds
    print("  most extra seconds by op:")
    for op, seconds in extra.most_common(10):
        print(f"    {op:<40} {seconds:+8.2f} s")
    overhead = run.seconds * run.workers - ours_s
    if run.name == "ray":
        print(f"  Ray start {run.ray_start:.1f} s (in the wall time); driver CPU {run.driver_cpu:.1f} s")
        print(f"  Ray/driver overhead (wall × {run.workers} workers − Σ case seconds): {overhead:.1f} s")
    ratio = ours_s / torch_s if torch_s else float("nan")
    label = "serial per-case ratio" if run.name == "serial" else "per-case ratio on Ray"
    print(f"  {label} (Σ distcheck / Σ torch case seconds, target ≤ 1.0): {ratio:.3f}")
    return {
        "cases_timed": len(pairs),
        "torch_case_seconds": torch_s,
        "distcheck_case_seconds": ours_s,
        "per_case_ratio": ratio,
        "driver_cpu": run.driver_cpu,
        "ray_start": run.ray_start,
        "overhead_seconds": overhead,
        "extra_by_op": dict(extra.most_common(10)),
    }


def differing(reference: dict[str, CaseRecord], run: DistcheckRun) -> list[str]:
    """The keys of the cases whose verdicts differ (or that the run did not record)."""
    return [
        key for key, theirs in reference.items() if key not in run.records or run.records[key].verdict != theirs.verdict
    ]


def compare(reference: dict[str, CaseRecord], reference_seconds: float, run: DistcheckRun, loops: int = 1) -> list[str]:
    """Print the run against torch's loop; the keys whose verdicts differ."""
    differ = differing(reference, run)
    where = f"on Ray ({run.workers} workers)" if run.name == "ray" else "serial (1 thread)"
    start = f"  (Ray start {run.ray_start:.1f} s, driver CPU {run.driver_cpu:.1f} s)" if run.name == "ray" else ""
    print()
    label = "torch serial loop (1 thread):" if loops == 1 else f"torch serial loop, mean of {loops}:"
    print(f"{label:<37}{reference_seconds:8.1f} s")
    print(f"distcheck {where + ':':<26}{run.seconds:8.1f} s{start}")
    print(f"ratio:                               {reference_seconds / run.seconds:8.2f}x")
    print(f"verdicts identical:                  {len(reference) - len(differ)} / {len(reference)} cases")
    for key in differ[:20]:
        mine = run.records.get(key)
        print(f"  differ: {key}: torch {reference[key].verdict}, distcheck {mine.verdict if mine else 'missing'}")
    return differ


def write_json(
    path: str, args, reference, reference_seconds, runs: list[DistcheckRun], figures: dict, loops: list
) -> None:
    cases = {}
    for key, theirs in reference.items():
        case = {"torch": [theirs.verdict, theirs.seconds]}
        if len(loops) > 1:
            case["torch_loops"] = [loop[0][key].seconds if key in loop[0] else None for loop in loops]
        for run in runs:
            ours = run.records.get(key)
            case[run.name] = None if ours is None else [ours.verdict, ours.seconds, ours.tasks]
        cases[key] = case
    document = {
        "mode": args.mode,
        "checks": args.checks,
        "dtypes": args.dtypes,
        "torch_seconds": reference_seconds,  # with --torch-after: the mean of the two loops
        "torch_loop_seconds": [seconds for _, seconds in loops],
        **{f"{run.name}_seconds": run.seconds for run in runs},
        "breakdown": figures,
        # key: {"torch": [verdict, seconds], "torch_loops": [seconds, seconds] (--torch-after),
        #       "ray"/"serial": [verdict, seconds, tasks]}
        "cases": cases,
    }
    with open(path, "w") as f:
        json.dump(document, f, indent=1)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("fast", "slow"), default="fast")
    parser.add_argument("--checks", default="grad,gradgrad")
    parser.add_argument("--dtypes", default="float64,complex128")
    parser.add_argument("--ops", help="comma-separated op names (default: every op)")
    parser.add_argument("--max-cases", type=int)
    parser.add_argument("--max-jacobian-mb", type=float, default=default_max_jacobian_mb())
    parser.add_argument("--address", help="run distcheck on this Ray (default: a local one, as `distcheck run`)")
    parser.add_argument("--distcheck", choices=("ray", "serial", "both"), default="ray")
    parser.add_argument("--json", help="write the per-case records of every run here")
    parser.add_argument(
        "--report", help="write the JSON report of distcheck's Ray run here (as `distcheck run --json`)"
    )
    parser.add_argument(
        "--torch-after",
        action="store_true",
        help="run torch's loop again after distcheck's runs; compare against the mean of both loops",
    )
    return parser.parse_args(argv)


def main() -> int:
    if not hash_seed.is_fixed():  # every process of a run hashes strings alike (see distcheck.hash_seed)
        hash_seed.reexec([os.path.abspath(__file__), *sys.argv[1:]])
    args = parse(sys.argv[1:])
    selection = Selection(
        checks=tuple(args.checks.split(",")),
        ops=tuple(args.ops.split(",")) if args.ops else None,
        dtypes=tuple(args.dtypes.split(",")),
    )
    budget = Budget(args.max_jacobian_mb * 2**20)
    print(f"torch {torch.__version__}, {local_cpus()} cores; before: {load()}")
    print(f"suite {SUITE}, mode {args.mode}, checks {args.checks}, dtypes {args.dtypes}")
    suite = get_suite(SUITE, args.mode)
    suite.prepare()  # the op database, loaded once before any clock starts
    try:
        next(iter(suite.groups(selection)), None)  # a bad --ops, --checks or --dtypes: one line, before any run
    except UsageError as e:
        print(f"bench_suite: error: {e}", file=sys.stderr)
        return 2

    print("(a) torch.autograd.gradcheck, serial loop, 1 thread ...", flush=True)
    reference, reference_seconds = reference_loop(args.mode, selection, budget, args.max_cases)
    print(f"    {len(reference)} cases in {reference_seconds:.1f} s; {load()}", flush=True)

    runs = []
    limits = {"max_jacobian_mb": args.max_jacobian_mb, "max_cases": args.max_cases}
    if args.distcheck in ("ray", "both"):
        print("(b) distcheck run on Ray (start included) ...", flush=True)
        runs.append(distcheck_on_ray(args.mode, selection, RunOptions(address=args.address, **limits), args.report))
    if args.distcheck in ("serial", "both"):
        print("(c) distcheck run --serial, in this process, 1 thread ...", flush=True)
        runs.append(distcheck_serial(args.mode, selection, RunOptions(serial=True, **limits)))

    loops = [(reference, reference_seconds)]
    flaky: list[str] = []
    if args.torch_after:
        print("(a') torch.autograd.gradcheck, serial loop, 1 thread, again ...", flush=True)
        again, again_seconds = reference_loop(args.mode, selection, budget, args.max_cases)
        print(f"    {len(again)} cases in {again_seconds:.1f} s; {load()}", flush=True)
        loops.append((again, again_seconds))
        reference, flaky = mean_reference(reference, again)
        reference_seconds = (reference_seconds + again_seconds) / 2

    print(f"\nafter: {load()}")
    if args.torch_after:
        before, after = loops[0][1], loops[1][1]
        print(f"torch's loop before distcheck {before:.1f} s, after {after:.1f} s ({after / before - 1:+.1%}):")
        print(f"  the figures below are against their mean, {reference_seconds:.1f} s (per case: the mean of its two)")
        for run in runs:
            against = f"before {before / run.seconds:.2f}x, after {after / run.seconds:.2f}x"
            print(f"  ratio of distcheck {run.name} against torch's loop {against}")
        for key in flaky[:20]:
            print(f"  torch's two loops differ on {key}")
    figures, differ = {}, list(flaky)
    for run in runs:
        differ += compare(reference, reference_seconds, run, len(loops))
        figures[run.name] = breakdown(reference, run)
    if args.json:
        write_json(args.json, args, reference, reference_seconds, runs, figures, loops)
    return 0 if not differ else 1


if __name__ == "__main__":
    sys.exit(main())
