"""One large gradient check, timed side by side in one run: torch.autograd.gradcheck (serial,
one thread: the reference), distcheck's serial executor, and distcheck on Ray with every local
core. Prints the times, the ratios against the targets, and the driver's peak memory.

    .venv/bin/python benchmarks/bench_single_check.py                 # the matmul chain
    .venv/bin/python benchmarks/bench_single_check.py --check conv2d  # a convolution
    .venv/bin/python benchmarks/bench_single_check.py --address auto  # on a running cluster

Targets: distcheck serial within 10% of torch's time; distcheck on Ray with P CPUs at least
0.85·P times faster than torch's serial gradcheck. Ray is started and its workers warmed up
(one untimed run of the same check) before anything is timed; the three methods then run
interleaved, ``--repeats`` times, each after waiting (up to ``--settle`` seconds) for an idle
machine, and the best time of each is compared (the machine may be shared: the cores other
programs kept busy during each run are printed, to show interference). Peak memory
is measured in a fresh process per method, above that process's memory once its inputs are
built.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import distcheck  # noqa: E402
from benchmarks.loopback import stat_fields  # noqa: E402
from distcheck.check import plan_check  # noqa: E402
from distcheck.executors.ray_executor import RayExecutor, ensure_ray  # noqa: E402
from distcheck.executors.serial import SerialExecutor  # noqa: E402
from distcheck.options import CheckOptions  # noqa: E402


@dataclass(frozen=True)
class Check:
    description: str
    build: Callable[[], tuple[Callable, tuple]]


def _tensor(*shape: int, seed: int, requires_grad: bool = True) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, dtype=torch.float64, generator=g) / shape[0] ** 0.5).requires_grad_(requires_grad)


def matmul_chain(x, w1, w2, w3):
    return torch.tanh(torch.tanh(x @ w1) @ w2) @ w3


CHECKS = {
    "chain": Check(
        "matmul chain tanh(tanh(x @ w1) @ w2) @ w3; x 64×32 and w3 384×8 differentiable "
        "(5,120 input elements), w1 32×384 and w2 384×384 constant; output 64×8",
        lambda: (
            matmul_chain,
            (
                _tensor(64, 32, seed=0),
                _tensor(32, 384, seed=1, requires_grad=False),
                _tensor(384, 384, seed=2, requires_grad=False),
                _tensor(384, 8, seed=3),
            ),
        ),
    ),
    "conv2d": Check(
        "conv2d; input 1×8×16×16, weight 16×8×5×5, bias 16 (5,264 input elements); output 1×16×12×12",
        lambda: (F.conv2d, (_tensor(1, 8, 16, 16, seed=0), _tensor(16, 8, 5, 5, seed=1), _tensor(16, seed=2))),
    ),
}

METHODS = {
    "torch": "torch.autograd.gradcheck, 1 thread",
    "serial": "distcheck, serial executor",
    "ray": "distcheck, Ray executor",
    "torch default threads": "torch.autograd.gradcheck, default threads (for information)",
}


def run(method: str, func: Callable, inputs: tuple, ray_executor: RayExecutor | None) -> None:
    if method == "torch":
        assert torch.autograd.gradcheck(func, inputs)
    elif method == "serial":
        assert distcheck.gradcheck(func, inputs, executor=SerialExecutor())
    else:
        assert distcheck.gradcheck(func, inputs, executor=ray_executor)


def _cpu_ticks() -> tuple[int, int, int]:
    """Clock ticks so far: CPU busy on the whole machine, CPU used by this process and its
    descendants (the local Ray: raylet, workers), and elapsed CPU time of the machine."""
    with open("/proc/stat") as f:
        user, nice, system, idle, iowait, irq, softirq, steal = (int(v) for v in f.readline().split()[1:9])
    parents, ticks = {}, {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = stat_fields(f"/proc/{entry}/stat")
        except (OSError, IndexError):
            continue
        parents[int(entry)], ticks[int(entry)] = int(fields[1]), int(fields[11]) + int(fields[12])
    own, frontier = set(), {os.getpid()}
    while frontier:
        own |= frontier
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - own
    busy = user + nice + system + irq + softirq + steal
    return busy, sum(ticks.get(pid, 0) for pid in own), busy + idle + iowait


def _others_cores(since: tuple[int, int, int]) -> float:
    """Cores that other programs kept busy since ``since``: their work distorts our timings."""
    busy, own, total = _cpu_ticks()
    return max(0.0, (busy - since[0]) - (own - since[1])) / max(total - since[2], 1) * os.cpu_count()


def settle(limit: float) -> None:
    """Wait, up to ``limit`` seconds, until other programs leave the machine idle (under 0.25
    cores for a second)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        since = _cpu_ticks()
        time.sleep(1.0)
        if _others_cores(since) < 0.25:
            return


def timed(method: str, func: Callable, inputs: tuple, ray_executor: RayExecutor | None) -> tuple[float, float]:
    """Wall time of one run, and the cores other programs kept busy meanwhile."""
    since = _cpu_ticks()
    start = time.perf_counter()
    run(method, func, inputs, ray_executor)
    seconds = time.perf_counter() - start
    return seconds, _others_cores(since)


def _memory_mib(field: str) -> float:
    """``VmRSS`` (resident now) or ``VmHWM`` (peak resident) of this process, in MiB."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024


def measure_memory(method: str, check: str, address: str | None) -> None:
    """(Run in a fresh process.) Print the peak resident memory of one run of the check,
    and the memory before it (imports done, inputs built, function run once, Ray joined)."""
    func, inputs = CHECKS[check].build()
    executor = None
    if method == "ray":
        ensure_ray(address)
        executor = RayExecutor(address)
    if method != "torch default threads":
        torch.set_num_threads(1)
    outputs = func(*inputs)  # torch's one-time allocations (BLAS buffers, thread pools) come before
    torch.autograd.grad(outputs.sum(), [x for x in inputs if x.requires_grad])
    baseline = _memory_mib("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak (VmHWM) to the current resident size
    run(method, func, inputs, executor)
    print(json.dumps({"baseline": baseline, "peak": _memory_mib("VmHWM")}))


def peak_memory(method: str, check: str, address: str) -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--check", check, "--memory-of", method]
    out = subprocess.run([*command, "--address", address], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def describe(plan, tasks: list[list[int]]) -> str:
    """Each task's units: ``NumericalColumns[0:512]``, ``AuxiliaryCheck + AuxiliaryCheck`` (one task)..."""

    def unit(k: int) -> str:
        u = plan.units[k]
        return f"{type(u).__name__}[{u.start}:{u.stop}]" if hasattr(u, "start") else type(u).__name__

    return ", ".join(" + ".join(unit(k) for k in task) for task in tasks)


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", choices=sorted(CHECKS), default="chain")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--address", default=None, help="Ray cluster to join (default: a new local Ray)")
    parser.add_argument("--settle", type=float, default=30, help="seconds to wait for an idle machine before a run")
    parser.add_argument("--memory-of", choices=sorted(METHODS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_of:
        return measure_memory(args.memory_of, args.check, args.address)

    default_threads = torch.get_num_threads()
    func, inputs = CHECKS[args.check].build()
    print(f"check: {CHECKS[args.check].description}; float64, slow mode (full Jacobians)")

    start = time.perf_counter()
    ensure_ray(args.address)
    import ray

    ray_executor = RayExecutor(args.address)
    workers = ray_executor.workers
    run("ray", func, inputs, ray_executor)  # warm the workers up: torch imported, code loaded
    print(
        f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; Ray {ray.__version__} at "
        f"{ray.get_runtime_context().gcs_address}: {workers} CPUs, started and warmed up in "
        f"{time.perf_counter() - start:.1f} s (not timed)"
    )
    _, plan = plan_check(func, inputs, CheckOptions(), ray_executor)
    tasks = ray_executor.policy.tasks(plan.units, plan.subject.costs)
    print(f"on Ray the check is {len(plan.units)} units in {len(tasks)} tasks, longest first: {describe(plan, tasks)}")

    times: dict[str, list[tuple[float, float]]] = {method: [] for method in METHODS}
    for _ in range(args.repeats):
        for method in METHODS:
            torch.set_num_threads(default_threads if method == "torch default threads" else 1)
            settle(args.settle)
            times[method].append(timed(method, func, inputs, ray_executor))
    torch.set_num_threads(default_threads)

    print(f"\nwall times in seconds, {args.repeats} interleaved runs (cores other programs kept busy meanwhile):")
    best = {}
    for method, label in METHODS.items():
        label = f"{label} ({workers} CPUs)" if method == "ray" else label
        best[method] = min(seconds for seconds, _ in times[method])
        runs = "  ".join(f"{seconds:6.2f} ({cores:.1f})" for seconds, cores in times[method])
        print(f"  {label:<62} {runs}   best {best[method]:6.2f}")

    serial_ratio = best["serial"] / best["torch"]
    ray_speedup = best["torch"] / best["ray"]
    ray_target = 0.85 * workers
    print("\nratios of the best times:")
    print(f"  distcheck serial / torch 1 thread: {serial_ratio:.3f}   target <= 1.10   {_met(serial_ratio <= 1.10)}")
    print(
        f"  torch 1 thread / distcheck on Ray: {ray_speedup:.2f}x   "
        f"target >= 0.85 x {workers} CPUs = {ray_target:.2f}x   {_met(ray_speedup >= ray_target)}"
    )
    print(f"  torch 1 thread / torch {default_threads} threads: {best['torch'] / best['torch default threads']:.2f}x")

    address = ray.get_runtime_context().gcs_address
    print("\ndriver peak memory (a fresh process per method; above its memory once the inputs are built):")
    for method, label in METHODS.items():
        memory = peak_memory(method, args.check, address)
        print(f"  {label:<62} {memory['peak'] - memory['baseline']:7.1f} MiB   (peak RSS {memory['peak']:.0f} MiB)")


if __name__ == "__main__":
    main()
