"""The first large check of a fresh process on a Ray that distcheck did not start, against torch.

Each time is a fresh process's (nothing warm): torch's ``gradcheck`` on one thread; and
``distcheck.gradcheck(..., executor="ray")`` timed from the call to its return, workers'
warm-up included:

- ``own``: the process calls ``ray.init()`` itself first (untimed, as a user's code does);
- ``address``: a cluster given by address (a one-node loopback cluster of this machine's cores,
  started once before; the process joins it inside the timed call);
- ``distcheck``: distcheck starts its local Ray inside the timed call (for comparison).

The methods run in turn, ``--repeats`` rounds; prints every time, the load average, and torch's
time over each Ray's (target: at least 1.5 on ``own`` and ``address``), median over the rounds;
and, for ``own`` and ``distcheck`` (whose Ray is the process's own), how many Ray worker
processes lived during the check: one per CPU when none was started cold in the middle of it.

    .venv/bin/python benchmarks/bench_first_check_any_ray.py                 # conv2d, 3 rounds
    .venv/bin/python benchmarks/bench_first_check_any_ray.py --check chain --repeats 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.loopback import AUTH, LoopbackCluster, proc_entries  # noqa: E402

METHODS = ("torch", "own", "address", "distcheck")


def _is_worker(command: str) -> bool:
    """A Ray worker process (``ray::IDLE``, ``ray::<task>``), not one of Ray's agents."""
    title = command.split("\0")[0]
    return title.startswith("ray::") and not title.split()[0].endswith("Agent")


class WorkersSeen:
    """The Ray worker processes (``ray::...``) among this process's descendants, looked for
    every 0.1 s while open."""

    def __init__(self):
        self.seen: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._look, daemon=True)

    def _look(self) -> None:
        while not self._stop.wait(0.1):
            parents = {pid: int(fields[1]) for pid, fields, _ in proc_entries()}
            workers = {pid for pid, _, command in proc_entries() if _is_worker(command)}
            for pid in workers:
                up = parents.get(pid)
                while up not in (None, 0, 1, os.getpid()):
                    up = parents.get(up)
                if up == os.getpid():
                    self.seen.add(pid)

    def __enter__(self) -> WorkersSeen:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def one(method: str, check: str, address: str | None) -> tuple[float, int | None]:
    """(In a fresh process.) The seconds of the first check by ``method``, and the Ray worker
    processes that lived meanwhile (None where this process's descendants are not the Ray's)."""
    import torch

    from benchmarks.bench_single_check import CHECKS

    function, inputs = CHECKS[check].build()
    if method == "torch":
        torch.set_num_threads(1)
        start = time.perf_counter()
        assert torch.autograd.gradcheck(function, inputs)
        return time.perf_counter() - start, None
    import distcheck

    if method == "own":
        import ray

        ray.init(_temp_dir=os.environ["BENCH_RAY_TEMP"])  # the user's own Ray, untimed
    if method == "address":
        os.environ["DISTCHECK_RAY_ADDRESS"] = address
    with WorkersSeen() as workers:
        start = time.perf_counter()
        assert distcheck.gradcheck(function, inputs, executor="ray")
        seconds = time.perf_counter() - start
    return seconds, None if method == "address" else len(workers.seen)


def fresh(method: str, check: str, address: str | None) -> tuple[float, int | None]:
    temp = tempfile.mkdtemp(prefix="dcfirst-")
    command = [sys.executable, os.path.abspath(__file__), "--check", check, "--one", method]
    env = {**os.environ, **AUTH, "BENCH_RAY_TEMP": temp, **({"BENCH_ADDRESS": address} if address else {})}
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=True, timeout=900)
    except subprocess.CalledProcessError as e:
        raise SystemExit(f"{method} failed:\n{e.stdout[-2000:]}\n{e.stderr[-4000:]}") from None
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    seconds, workers = done.stdout.strip().splitlines()[-1].split()
    return float(seconds), None if workers == "None" else int(workers)


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", choices=("chain", "conv2d"), default="conv2d")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--one", choices=METHODS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(*one(args.one, args.check, os.environ.get("BENCH_ADDRESS")))
        return 0
    cpus = len(os.sched_getaffinity(0))
    times: dict[str, list[float]] = {m: [] for m in METHODS}
    workers: dict[str, int | None] = {}
    with LoopbackCluster(nodes=1, cpus=cpus, log=lambda line: None) as cluster:
        print(f"{args.check}; a fresh process each; cluster by address: one node of {cpus} CPUs at {cluster.address}")
        for round_ in range(args.repeats):
            for method in METHODS:
                seconds, workers[method] = fresh(method, args.check, cluster.address)
                times[method].append(seconds)
            row = ", ".join(f"{m} {times[m][-1]:.2f} s" for m in METHODS)
            row += "; Ray worker processes during the check: " + ", ".join(
                f"{m} {workers[m]}" for m in METHODS if workers[m] is not None
            )
            ratios = ", ".join(f"{m} {times['torch'][-1] / times[m][-1]:.2f}" for m in METHODS[1:])
            print(f"round {round_ + 1} (load {load()}): {row}; torch / first check: {ratios}", flush=True)
    torch_time = statistics.median(times["torch"])
    for method in METHODS[1:]:
        ratio = torch_time / statistics.median(times[method])
        print(f"median: torch / first check on {method}: {ratio:.2f} (target >= 1.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
