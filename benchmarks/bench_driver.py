"""The driver's CPU per case, measured alone (issue 12 item 1): Ray runs apart (its own ``ray
start --head``, in its own process group), and ``distcheck run --address ...`` runs as a child
process on a small and a larger selection (the first N ops of the suite: a selection by op
keeps enumeration on the workers, where ``--max-cases`` would list every case on the driver);
the child's CPU time (``getrusage`` of children:
the driver only, since it joins Ray rather than starting it) gives the fixed start-up CPU
(imports, joining Ray: the intercept) and the marginal driver CPU per case (the slope; target
≤ 0.02 ms).

    .venv/bin/python benchmarks/bench_driver.py                          # the first 15 and 120 ops
    .venv/bin/python benchmarks/bench_driver.py --sizes 5,20             # a quick look
    .venv/bin/python benchmarks/bench_driver.py --sizes 15,120 -- --mode slow

Arguments after ``--`` go to ``distcheck run`` as they are (e.g. ``--mode slow``, ``--ops``).
Stops the Ray it started, also on Ctrl-C and errors.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.loopback import AUTH, REPO, LoopbackCluster  # noqa: E402


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def first_ops(suite: str, count: int) -> list[str]:
    """The first ``count`` ops of the suite (torch-opinfo: op_db's order)."""
    names = subprocess.run(
        [sys.executable, "-m", "distcheck", "list", "--suite", suite, "--checks", "grad"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    ops: list[str] = []
    for line in names:
        op = line.split("\t")[0].split("::")[1]
        if op not in ops:
            ops.append(op)
    return ops[:count]


def run_driver(address: str, ops: list[str], suite: str, checks: str, extra: list[str]) -> tuple[int, float, float]:
    """``(cases, CPU seconds, wall seconds)`` of one ``distcheck run`` child process."""
    with tempfile.TemporaryDirectory() as folder:
        report = os.path.join(folder, "report.json")
        command = [sys.executable, "-m", "distcheck", "run", "--address", address, "--suite", suite]
        command += ["--checks", checks, "--ops", ",".join(ops), "--json", report, "--out", os.path.join(folder, "run")]
        command += extra
        before, begin = children_cpu(), time.perf_counter()
        done = subprocess.run(command, cwd=REPO, env={**os.environ, **AUTH}, capture_output=True, text=True)
        cpu, wall = children_cpu() - before, time.perf_counter() - begin
        if done.returncode not in (0, 1):  # 1: some case failed, a run all the same
            tail = " | ".join(done.stderr.strip().splitlines()[-3:])
            raise RuntimeError(f"distcheck run --ops ({len(ops)} ops) exited {done.returncode}: {tail}")
        with open(report) as f:
            cases = len(json.load(f)["cases"])
    return cases, cpu, wall


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares ``(intercept, slope)`` of CPU seconds over cases."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    if spread == 0:
        raise ValueError("the selections have the same number of cases: give different --sizes")
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / spread
    return mean_y - slope * mean_x, slope


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    ours = argv[: argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="15,120", help="ops in each run: the suite's first N (default: %(default)s)")
    p.add_argument("--suite", default="torch-opinfo")
    p.add_argument("--checks", default="grad,gradgrad")
    p.add_argument("--cpus", type=int, default=os.cpu_count(), help="the Ray head's CPUs (default: this machine's)")
    args = p.parse_args(ours)
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
        if len(sizes) < 2 or min(sizes) < 1:
            raise ValueError
    except ValueError:
        p.error("--sizes: two or more positive integers, comma-separated")
    signal.signal(signal.SIGTERM, _interrupt)
    cluster = LoopbackCluster(nodes=1, cpus=args.cpus)
    try:
        cluster.start()
        points = []
        ops = first_ops(args.suite, max(sizes))
        print(f"{'ops':>12} {'cases':>7} {'driver CPU s':>13} {'wall s':>8} {'CPU ms/case':>12}")
        for size in sizes:
            cases, cpu, wall = run_driver(cluster.address, ops[:size], args.suite, args.checks, extra)
            points.append((cases, cpu))
            print(f"{size:>12} {cases:>7} {cpu:>13.2f} {wall:>8.1f} {1000 * cpu / cases:>12.3f}")
        intercept, slope = fit(points)
        print(f"fixed start-up CPU (imports, joining Ray): {intercept:.2f} s")
        print(f"marginal driver CPU per case: {1000 * slope:.4f} ms (target <= 0.02 ms)")
    except KeyboardInterrupt:
        print("bench_driver: interrupted; stopping Ray", file=sys.stderr)
        return 130
    except (RuntimeError, ValueError) as e:
        print(f"bench_driver: error: {e}", file=sys.stderr)
        return 1
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
