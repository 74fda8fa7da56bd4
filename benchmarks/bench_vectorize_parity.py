"""Parity at scale: a slice of the slow-mode suite run batched (``distcheck run --mode slow``)
and element by element (``--no-vectorize``), each a serial run in its own process pinned to its
own core (one after the other on a one-core machine); then every case's verdict compared.

Prints, with the load average before and after: the cases and the verdicts that differ (the
target: none), what the batched run's comparisons were decided on (batched, and the fallbacks by
reason, from its report's summary), and each run's seconds in its cases (the two ran at once, on
two cores: their ratio is indicative, bench_vectorize.py measures per core).

    .venv/bin/python benchmarks/bench_vectorize_parity.py --max-cases 3000     # the first 3,000 slow grad cases
    .venv/bin/python benchmarks/bench_vectorize_parity.py --ops cumsum,cdist --checks grad,gradgrad

Target (issue #48): the whole slow grad suite (23,320 cases), 0 verdict differences.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

RUNS = {"batched": [], "exact": ["--no-vectorize"]}


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def command(args, folder: str, extra: list[str]) -> list[str]:
    words = [sys.executable, "-m", "distcheck", "run", "--suite", "torch-opinfo", "--mode", "slow", "--serial"]
    words += ["--checks", args.checks, "--timeout", str(args.timeout), "--out", folder, *extra]
    if args.ops:
        words += ["--ops", args.ops]
    if args.dtypes:
        words += ["--dtypes", args.dtypes]
    if args.max_cases:
        words += ["--max-cases", str(args.max_cases)]
    return words


def run_both(args, root: str) -> dict[str, float]:
    """Both runs, at once on two cores where there are two; the wall seconds of each."""
    cores = sorted(os.sched_getaffinity(0))
    at_once = len(cores) > 1
    started, walls = {}, {}
    for k, (name, extra) in enumerate(RUNS.items()):
        core = {cores[-1 - k]} if at_once else set(cores)
        log = open(os.path.join(root, f"{name}.log"), "w")  # noqa: SIM115 (closed with the process)
        process = subprocess.Popen(
            command(args, os.path.join(root, name), extra),
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=lambda core=core: os.sched_setaffinity(0, core),
        )
        started[name] = (process, log, time.perf_counter())
        if not at_once:
            _wait(name, started, walls)
    for name in list(started):
        _wait(name, started, walls)
    return walls


def _wait(name: str, started: dict, walls: dict) -> None:
    process, log, began = started.pop(name)
    process.wait()
    log.close()
    walls[name] = time.perf_counter() - began
    if process.returncode not in (0, 1):  # 1: a case failed, as the suite's known failures do
        raise SystemExit(f"the {name} run exited {process.returncode}: see {log.name}")


def compare(root: str, walls: dict[str, float]) -> int:
    from distcheck.reduce.counts import BatchCounts
    from distcheck.storage.run_folder import read_run

    logs = {name: read_run(os.path.join(root, name)) for name in RUNS}
    verdicts = {name: {r.id: str(r.verdict) for r in log.records} for name, log in logs.items()}
    batched, exact = verdicts["batched"], verdicts["exact"]
    differing = sorted(case for case in batched.keys() | exact.keys() if batched.get(case) != exact.get(case))
    tally = collections.Counter(batched.values())
    print(
        f"{len(batched)} cases ({', '.join(f'{v} {n}' for v, n in tally.most_common())}); "
        f"verdicts differ on {len(differing)}"
    )
    for case in differing[:50]:
        print(f"  {case}: batched {batched.get(case)}, exact {exact.get(case)}")
    with open(os.path.join(root, "batched", "report.json")) as f:
        counts = BatchCounts.from_json(json.load(f)["summary"].get("batch_counts", {}))
    print(f"slow-mode comparisons: {counts.describe()}")
    seconds = {name: sum(r.seconds for r in log.records) for name, log in logs.items()}
    for name in RUNS:
        print(f"  {name}: {seconds[name]:.1f} s in its cases, {walls[name]:.1f} s wall")
    ratio = seconds["exact"] / seconds["batched"] if seconds["batched"] else float("nan")
    print(f"  exact / batched, the cases' seconds: {ratio:.2f}x")
    return 1 if differing else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", help="comma-separated op names (default: every op of the suite)")
    p.add_argument("--checks", default="grad")
    p.add_argument("--dtypes", help="default: the suite's")
    p.add_argument("--max-cases", type=int, help="the first N cases of the selection")
    p.add_argument("--timeout", type=float, default=600.0, help="per case, seconds")
    p.add_argument("--keep", metavar="DIR", help="put the two run folders in DIR (default: a temporary folder)")
    args = p.parse_args(argv)
    print(f"{load()}")
    with tempfile.TemporaryDirectory(prefix="vectorize-parity-") as temporary:
        root = args.keep or temporary
        os.makedirs(root, exist_ok=True)
        walls = run_both(args, root)
        status = compare(root, walls)
    print(load())
    return status


if __name__ == "__main__":
    sys.exit(main())
