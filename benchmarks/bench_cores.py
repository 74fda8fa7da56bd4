"""What the cores of this machine give a plain process pool: the ceiling of any parallel runner.

Runs the same cases (``distcheck run --serial`` in child processes, one thread each) first in one
process, then split in ``--processes`` halves (ops dealt out in turn) running at once, and prints
the speedup of the pool (time alone / wall time of the pool) and how much slower each case ran
side by side. On a machine whose cores slow each other down (shared caches, memory bandwidth,
hyperthreads of one core behind "2 CPUs"), a pool gets less than one × cores, and so does
distcheck on Ray: compare `bench_suite.py`'s ratio with this one's.

    .venv/bin/python benchmarks/bench_cores.py                 # six ops of make check-local's cases
    .venv/bin/python benchmarks/bench_cores.py --ops add,mul,linalg.svd,cumprod
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPS = "linalg.svd,ormqr,linalg.lu_solve,nn.functional.max_pool2d,svd,nn.functional.gaussian_nll_loss"


def start(ops: list[str], checks: str, folder: str, name: str) -> tuple[subprocess.Popen, str]:
    report = os.path.join(folder, f"{name}.json")
    command = [sys.executable, "-m", "distcheck", "run", "--serial", "--ops", ",".join(ops), "--checks", checks]
    command += ["--json", report, "--out", os.path.join(folder, name)]
    env = {**os.environ, "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), report


def case_seconds(report: str) -> float:
    with open(report) as f:
        return sum(case["seconds"] for case in json.load(f)["cases"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", default=OPS)
    parser.add_argument("--checks", default="grad,gradgrad")
    parser.add_argument("--processes", type=int, default=os.cpu_count())
    args = parser.parse_args()
    ops = args.ops.split(",")
    with tempfile.TemporaryDirectory() as folder:
        began = time.perf_counter()
        process, report = start(ops, args.checks, folder, "alone")
        process.wait()
        alone, alone_cases = time.perf_counter() - began, case_seconds(report)
        began = time.perf_counter()
        pool = [start(ops[k :: args.processes], args.checks, folder, f"part{k}") for k in range(args.processes)]
        for process, _ in pool:
            process.wait()
        together, together_cases = time.perf_counter() - began, sum(case_seconds(r) for _, r in pool)
    print(f"{len(ops)} ops, checks {args.checks}: one process {alone:.1f} s (cases {alone_cases:.1f} s)")
    print(f"{args.processes} processes at once: {together:.1f} s (cases {together_cases:.1f} s)")
    print(f"a plain process pool's speedup: {alone / together:.2f}x on {args.processes} processes")
    print(f"each case side by side took {together_cases / alone_cases:.2f}x its time alone")
    return 0


if __name__ == "__main__":
    sys.exit(main())
