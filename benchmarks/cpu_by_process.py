"""Where a run's CPU goes, by process: run a command (e.g. ``distcheck run``), sample every
process of this machine every ``--every`` seconds while it runs, and print the CPU seconds each
kind of process used meanwhile (the runners, the driver, the queue actor, Ray's raylet, GCS,
monitors and agents, the rest of the machine), against the wall time × cores.

    .venv/bin/python benchmarks/cpu_by_process.py -- make check-local
    .venv/bin/python benchmarks/cpu_by_process.py --every 1 -- .venv/bin/python -m distcheck run --ops add,mul

On 2 cores every CPU second that is not a runner's is taken from the cases (the main-job
issue's item 3: the driver and Ray out of the workers' way). The driver is the command and
its descendants that are not Ray's. A process that ends between two samples loses at most
``--every`` seconds of its CPU; Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.loopback import cpu_seconds, proc_entries, split_arguments  # noqa: E402

# (what a process's command line contains, the kind it is counted as), the first match wins
KINDS = (
    ("ray::runner", "runners (ray::runner, careful, IDLE)"),
    ("ray::careful", "runners (ray::runner, careful, IDLE)"),
    ("ray::_runner", "runners (ray::runner, careful, IDLE)"),  # the code before the runner's redesign
    ("ray::_careful", "runners (ray::runner, careful, IDLE)"),
    ("ray::IDLE", "runners (ray::runner, careful, IDLE)"),
    ("ray::Coordinator", "split-case coordinators"),
    ("ray::run_split", "split-case coordinators"),
    ("ray::WorkQueue", "the queue actor (ray::WorkQueue)"),
    ("raylet", "raylet"),
    ("gcs_server", "GCS"),
    ("log_monitor.py", "log monitor, autoscaler monitor"),
    ("autoscaler/_private/monitor.py", "log monitor, autoscaler monitor"),
    ("dashboard", "dashboard, agents"),
    ("ray::RuntimeEnvAgent", "dashboard, agents"),
    ("ray::DashboardAgent", "dashboard, agents"),
)
DRIVER = "the driver (the command and its own children)"
OTHER = "the rest of the machine"


def kind(command_line: str, pid: int, driver: int, parents: dict[int, int]) -> str:
    """The kind a process is counted as: a Ray process by its command line, else the driver if
    it is the command (pid ``driver``) or descends from it (``parents``: pid -> parent pid)."""
    for part, name in KINDS:
        if part in command_line:
            return name
    seen = set()
    while pid not in seen and pid > 1:
        if pid == driver:
            return DRIVER
        seen.add(pid)
        pid = parents.get(pid, 0)
    return OTHER


def sample(into: dict[int, tuple[str, float, int]]) -> None:
    """Every process's ``(command line, CPU seconds so far, parent pid)``, by pid."""
    for pid, fields, command in proc_entries():
        into[pid] = (command.replace("\0", " ").strip(), cpu_seconds(fields), int(fields[1]))


def snapshot() -> dict[int, tuple[str, float, int]]:
    """:func:`sample` of every process now."""
    now: dict[int, tuple[str, float, int]] = {}
    sample(now)
    return now


def used_between(before: dict, after: dict, driver: int) -> collections.Counter:
    """CPU seconds by kind between two samples, of the processes in the second (one that started
    in between from 0; by pid: a Ray worker renames itself), this process left out; ``driver``:
    the pid counted as the driver, with its descendants."""
    parents = {pid: parent for pid, (_, _, parent) in after.items()}
    by_kind: collections.Counter = collections.Counter()
    for pid, (command_line, cpu, _) in after.items():
        if pid != os.getpid() or pid == driver:
            by_kind[kind(command_line, pid, driver, parents)] += cpu - before.get(pid, ("", 0.0, 0))[1]
    return by_kind


class Sampler:
    """Samples every process every ``every`` seconds in a thread of this process, from
    :meth:`start` to :meth:`stop` (so that a process that ends meanwhile is counted up to its
    last sample); ``own_cpu``: the CPU seconds the sampling took (this process's CPU counts
    them, take them off)."""

    def __init__(self, every: float = 1.0):
        self.every, self.own_cpu = every, 0.0
        self.before: dict[int, tuple[str, float, int]] = {}
        self.seen: dict[int, tuple[str, float, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)

    def start(self) -> Sampler:
        self.before = snapshot()
        self._thread.start()
        return self

    def _run(self) -> None:
        begin = time.thread_time()
        while True:
            sample(self.seen)
            self.own_cpu = time.thread_time() - begin
            if self._stop.wait(self.every):
                break
        sample(self.seen)
        self.own_cpu = time.thread_time() - begin

    def stop(self, driver: int) -> collections.Counter:
        """CPU seconds by kind since :meth:`start` (see :func:`used_between`)."""
        self._stop.set()
        self._thread.join()
        return used_between(self.before, self.seen, driver)


def measure(command: list[str], every: float) -> tuple[float, collections.Counter]:
    """Run ``command``; ``(wall seconds, CPU seconds by kind)`` while it ran."""
    sampler = Sampler(every).start()
    begin = time.perf_counter()
    child = subprocess.Popen(command)
    try:
        child.wait()
    except KeyboardInterrupt:
        child.terminate()
        child.wait()
        raise
    finally:
        wall = time.perf_counter() - begin
        by_kind = sampler.stop(child.pid)
    return wall, by_kind


def main(argv: list[str] | None = None) -> int:
    ours, command = split_arguments(argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--every", type=float, default=0.5, help="seconds between samples (%(default)s)")
    args = p.parse_args(ours)
    if not command or args.every <= 0:
        p.error("give the command to measure after --, and a positive --every")
    if not os.path.isdir("/proc/self"):
        p.error("needs Linux's /proc")
    wall, by_kind = measure(command, args.every)
    cores = os.cpu_count() or 1
    print(f"wall {wall:.1f} s on {cores} cores: {wall * cores:.1f} core-seconds")
    for name, cpu in by_kind.most_common():
        print(f"  {cpu:8.2f} s  {100 * cpu / (wall * cores):5.1f} %  {name}")
    print(f"  {wall * cores - sum(by_kind.values()):8.2f} s  idle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
