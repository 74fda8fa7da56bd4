"""The first check after Ray starts, against the same check run again (warm workers).

In a fresh process: distcheck starts (or joins) Ray — which warms every worker slot: each
imports torch and distcheck's task code at once — then runs one large check on Ray
``--repeats`` times. Prints Ray's start (warm-up included), each run's time and the ratio of
the first run to the best later one (target ≤ 1.2).

    .venv/bin/python benchmarks/bench_first_check.py                  # conv2d, a new local Ray
    .venv/bin/python benchmarks/bench_first_check.py --check chain
    .venv/bin/python benchmarks/bench_first_check.py --address auto   # a running cluster
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import distcheck  # noqa: E402
from benchmarks.bench_single_check import CHECKS  # noqa: E402
from distcheck.executors.ray_executor import RayExecutor, cluster_cpus, ensure_ray  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", choices=sorted(CHECKS), default="conv2d")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--address", help="a running Ray cluster (default: start a local one)")
    args = parser.parse_args()
    check = CHECKS[args.check]
    print(f"{args.check}: {check.description}")
    torch.set_num_threads(1)
    function, inputs = check.build()
    start = time.perf_counter()
    ensure_ray(args.address)
    print(f"Ray started or joined, every worker warm: {time.perf_counter() - start:.2f} s ({cluster_cpus()} CPUs)")
    executor = RayExecutor(args.address)
    times = []
    for run in range(args.repeats):
        began = time.perf_counter()
        assert distcheck.gradcheck(function, inputs, executor=executor)
        times.append(time.perf_counter() - began)
        print(f"  run {run + 1}: {times[-1]:.2f} s", flush=True)
    ratio = times[0] / min(times[1:])
    print(f"first run / best later run: {ratio:.2f} (target <= 1.2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
