"""The torch-opinfo ``grad`` suite in slow mode (full Jacobians, as PyTorch's periodic
slow-gradcheck job), timed side by side in one run:

(a) the reference: a serial loop of ``torch.autograd.gradcheck`` on one thread over exactly the
    cases distcheck runs (same ids, same rebuilt inputs, same options, same RNG seeds; a case over
    the memory budget is skipped by both, from the same size estimate);
(b) ``distcheck run`` on a local Ray with every core of this machine (Ray's start included).

Prints both wall times, their ratio and the per-case verdict agreement, with the machine's load
average before and after (these machines are shared: the load says how much to trust a ratio).

    .venv/bin/python benchmarks/bench_opinfo_slow.py                      # the whole suite (~20 min)
    .venv/bin/python benchmarks/bench_opinfo_slow.py --ops add,linalg.det  # a quick look
    .venv/bin/python benchmarks/bench_opinfo_slow.py --json bench.json     # per-case details

Targets: identical verdicts on every case; ratio at least 0.9 × cores (1.8 on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ray  # noqa: E402
import torch  # noqa: E402

from distcheck.executors.ray_executor import ensure_ray, local_cpus  # noqa: E402
from distcheck.reports.console import ConsoleProgress, summary  # noqa: E402
from distcheck.runner import CaseRecord, RunOptions, hash_seed, run_suite, select  # noqa: E402
from distcheck.runner.budget import SKIP, Budget, default_max_jacobian_mb, estimate, has_slow_calls  # noqa: E402
from distcheck.runner.judge import judge, torch_checker  # noqa: E402
from distcheck.suites import Selection, get_suite  # noqa: E402

SUITE, MODE = "torch-opinfo", "slow"


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def reference_loop(selection: Selection, budget: Budget, max_cases: int | None) -> tuple[dict[str, CaseRecord], float]:
    """torch.autograd.gradcheck over the selected cases, one after the other, on one thread."""
    torch.set_num_threads(1)
    suite = get_suite(SUITE, MODE)
    checker = torch_checker()
    records: dict[str, CaseRecord] = {}
    start = time.perf_counter()
    progress = time.monotonic()
    for info in select(suite, selection, max_cases):
        if info.status != "run":
            records[info.key] = CaseRecord(info.id, info.status, info.reason)
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
        records[info.key] = CaseRecord(info.id, verdict, message, time.perf_counter() - began, 1)
        if time.monotonic() - progress > 30:
            progress = time.monotonic()
            print(f"  torch loop: {len(records)} cases, {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return records, time.perf_counter() - start


def main() -> int:
    if not hash_seed.is_fixed():  # every process of a run hashes strings alike (see runner.hash_seed)
        hash_seed.reexec([os.path.abspath(__file__), *sys.argv[1:]])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", help="comma-separated op names (default: every op)")
    parser.add_argument("--dtypes", default="float64,complex128")
    parser.add_argument("--max-cases", type=int)
    parser.add_argument("--max-jacobian-mb", type=float, default=default_max_jacobian_mb())
    parser.add_argument("--json", help="write both runs' per-case records here")
    args = parser.parse_args()
    ops = tuple(args.ops.split(",")) if args.ops else None
    selection = Selection(checks=("grad",), ops=ops, dtypes=tuple(args.dtypes.split(",")))
    budget = Budget(args.max_jacobian_mb * 2**20)
    print(f"torch {torch.__version__}, {local_cpus()} cores for Ray; before: {load()}")
    print(f"suite {SUITE}, mode {MODE}, checks grad, memory budget {args.max_jacobian_mb:,.0f} MB")

    print("(a) torch.autograd.gradcheck, serial loop, 1 thread ...", flush=True)
    reference, reference_seconds = reference_loop(selection, budget, args.max_cases)
    print(f"    {len(reference)} cases in {reference_seconds:.1f} s; {load()}", flush=True)

    print("(b) distcheck run on local Ray (start included) ...", flush=True)
    start, driver_cpu = time.perf_counter(), time.process_time()
    try:
        ensure_ray(None, {"env_vars": dict(hash_seed.ENV)})  # as `distcheck run` starts it
        ray_start = time.perf_counter() - start
        options = RunOptions(max_jacobian_mb=args.max_jacobian_mb, max_cases=args.max_cases)
        result = run_suite(get_suite(SUITE, MODE), selection, options, ConsoleProgress())
        distcheck_seconds = time.perf_counter() - start
        driver_cpu = time.process_time() - driver_cpu
    finally:
        ray.shutdown()
    print(summary(result))

    ours = {r.id: r for r in result.records}
    same = [key for key in reference if key in ours and ours[key].verdict == reference[key].verdict]
    differ = [key for key in reference if key not in same]
    print()
    print(f"after: {load()}")
    print(f"torch serial loop (1 thread):      {reference_seconds:8.1f} s")
    print(
        f"distcheck on Ray ({result.workers} workers):     {distcheck_seconds:8.1f} s  "
        f"(Ray start {ray_start:.1f} s, driver CPU {driver_cpu:.1f} s)"
    )
    print(f"ratio:                             {reference_seconds / distcheck_seconds:8.2f}x")
    print(f"verdicts identical:                {len(same)} / {len(reference)} cases")
    for key in differ[:20]:
        theirs, mine = reference[key], ours.get(key)
        print(f"  differ: {key}: torch {theirs.verdict}, distcheck {mine.verdict if mine else 'missing'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "torch_seconds": reference_seconds,
                    "distcheck_seconds": distcheck_seconds,
                    "cases": {  # key: [torch verdict, distcheck verdict, torch seconds, distcheck seconds, tasks]
                        key: [
                            reference[key].verdict,
                            ours[key].verdict if key in ours else None,
                            reference[key].seconds,
                            ours[key].seconds if key in ours else None,
                            ours[key].tasks if key in ours else None,
                        ]
                        for key in reference
                    },
                },
                f,
                indent=1,
            )
    return 0 if not differ else 1


if __name__ == "__main__":
    sys.exit(main())
