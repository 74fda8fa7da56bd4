"""What ``executor="ray"`` adds to a small check that it keeps in-process, against the serial
executor and torch's own check, in one process, alternating.

Small checks (``sin`` of 4 elements, ``conv2d`` of a 1x2x5x5 input and a 2x2x3x3 weight,
``matmul`` of two 8x8 matrices; float64, fast mode, one intra-op thread), each by
``torch.autograd.gradcheck`` / ``gradgradcheck``, ``distcheck``'s with the serial executor, and
``distcheck``'s with the executor behind ``executor="ray"`` (:class:`RayFront`, no Ray started:
every check here is under its threshold and runs in-process). Rounds alternate the three; the
medians are printed, with what the front adds over the serial executor.

    .venv/bin/python benchmarks/bench_check_overhead.py              # 200 rounds
    .venv/bin/python benchmarks/bench_check_overhead.py --rounds 50
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import distcheck  # noqa: E402
from distcheck.executors.ray_front import RayFront  # noqa: E402


def cases():
    g = torch.Generator().manual_seed(0)

    def rand(*shape):
        return torch.rand(*shape, dtype=torch.float64, generator=g).requires_grad_()

    yield "sin, 4", torch.sin, (rand(4),)
    yield "conv2d, 1x2x5x5", lambda x, w: torch.nn.functional.conv2d(x, w), (rand(1, 2, 5, 5), rand(2, 2, 3, 3))
    yield "matmul, 8x8", torch.matmul, (rand(8, 8), rand(8, 8))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(1)
    front = RayFront(None)  # the executor="ray" front; nothing here reaches its threshold
    print(f"check overhead: {args.rounds} alternating rounds, medians in ms; load {os.getloadavg()[0]:.2f}")
    print(f"  {'check':<16} {'kind':<14} {'torch':>8} {'serial':>8} {'ray front':>10} {'front - serial':>15}")
    for name, func, inputs in cases():
        for kind in ("gradcheck", "gradgradcheck"):
            check = functools.partial(getattr(distcheck, kind), func, inputs, fast_mode=True)
            runs = {
                "torch": functools.partial(getattr(torch.autograd, kind), func, inputs, fast_mode=True),
                "serial": functools.partial(check, executor="serial"),
                "front": functools.partial(check, executor=front),
            }
            times: dict[str, list[float]] = {who: [] for who in runs}
            for run in runs.values():
                assert run()  # a first call's one-off costs are not timed
            for _ in range(args.rounds):
                for who, run in runs.items():
                    start = time.perf_counter()
                    run()
                    times[who].append(time.perf_counter() - start)
            ms = {who: statistics.median(t) * 1e3 for who, t in times.items()}
            print(
                f"  {name:<16} {kind:<14} {ms['torch']:8.3f} {ms['serial']:8.3f} {ms['front']:10.3f} "
                f"{ms['front'] - ms['serial']:15.3f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
