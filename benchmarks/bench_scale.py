"""A recorded run replayed at many workers: the real runner and Ray on a loopback multi-node
cluster (``benchmarks/loopback.py``: e.g. 4 nodes × 16 logical CPUs = 64 workers on a 2-core
machine), every case sleeping its recorded time (``distcheck/suites/replay.py``; split cases are
real slow-mode checks cut into Jacobian chunks, whole cases real fast-mode checks with ``--checks``).

    .venv/bin/python benchmarks/bench_scale.py REPORT                    # 4 nodes x 16 CPUs
    .venv/bin/python benchmarks/bench_scale.py REPORT --scale 0.1 --nodes 2 --cpus 8
    .venv/bin/python benchmarks/bench_scale.py REPORT --json replay.json  # the replay's own report

REPORT is a JSON report of ``distcheck run --json``. Prints the total case seconds, P, the lower
bound max(total / P, the longest case that cannot be split, driver CPU), the wall time from the
first dispatch on the joined, warm cluster, their ratio (target ≤ 1.15), start-up apart, and
where the difference goes: driver CPU (measured: this process is the driver), the cases'
overrun (the seconds they took beyond their recorded ones: on a machine with fewer cores than
workers, a woken worker waits for a core), the idle tail (reconstructed from when each case's
record arrived and how long it took) and the idle slots while work remained (the rest: Ray's
per-task overhead, dispatch gaps), next to the simulator's prediction of the same replay
(``benchmarks/simulate.py``); then the CPU of the whole run by kind of process (from ``/proc``,
as ``cpu_by_process.py`` counts it). ``--scale`` multiplies every recorded time (and
the split threshold, so that the same cases split). Stops exactly the processes it started,
also on Ctrl-C and errors.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import resource
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ray  # noqa: E402

from benchmarks import cpu_by_process  # noqa: E402
from benchmarks.loopback import LoopbackCluster  # noqa: E402
from benchmarks.sim import calibration  # noqa: E402
from benchmarks.sim.model import predict  # noqa: E402
from benchmarks.sim.workload import from_recording  # noqa: E402
from distcheck import hash_seed
from distcheck.executors.ray_executor import ensure_ray  # noqa: E402
from distcheck.records.case_record import CaseRecord, RecordBatch  # noqa: E402
from distcheck.records.listener import Listener  # noqa: E402
from distcheck.records.result import RunResult  # noqa: E402
from distcheck.reports import json_report  # noqa: E402
from distcheck.runner import RunOptions, run_suite  # noqa: E402
from distcheck.suites.base import Selection, UsageError  # noqa: E402
from distcheck.suites.replay import ReplaySuite, replay_suite  # noqa: E402

SPLIT_SECONDS = RunOptions().split_seconds


class Timeline(Listener):
    """When the run started (driver clock) and when each case's record arrived. A batch is kept
    whole while the run goes (its records are made after it: the driver makes none during a
    run, and this listener must not add that cost to what it measures)."""

    def __init__(self):
        self.run_start = time.perf_counter()  # reset just before run_suite
        self.started_at: float | None = None
        self._arrived: list[tuple[float, RecordBatch]] = []

    def started(self, result: RunResult) -> None:
        self.started_at = time.perf_counter()

    def recorded(self, batch: RecordBatch) -> None:
        self._arrived.append((time.perf_counter(), batch))

    @functools.cached_property
    def arrivals(self) -> list[tuple[float, CaseRecord]]:
        """Every record with when it arrived (read after the run)."""
        return [(at, record) for at, batch in self._arrived for record in batch.records()]

    def write(self, path: str) -> None:
        """One JSON line per record: seconds from the run's start, id, verdict, seconds, tasks."""
        with open(path, "w") as f:
            for arrival, r in self.arrivals:
                line = {"at": round(arrival - self.run_start, 4), "id": r.id, "verdict": r.verdict}
                f.write(json.dumps({**line, "seconds": r.seconds, "tasks": r.tasks}) + "\n")


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@ray.remote(num_cpus=0)
class _Barrier:
    def __init__(self):
        self.pids: set[int] = set()

    def arrive(self, pid: int) -> int:
        self.pids.add(pid)
        return len(self.pids)


@ray.remote(num_cpus=1)
def _warm_one(suite: ReplaySuite, barrier, workers: int, patience: float) -> int:
    """Load the recording, then hold this worker until every worker has arrived (so that each
    task lands on a worker process of its own)."""
    suite.prepare()
    deadline = time.monotonic() + patience
    while ray.get(barrier.arrive.remote(os.getpid())) < workers and time.monotonic() < deadline:
        time.sleep(0.2)
    return os.getpid()


def warm(suite: ReplaySuite, workers: int, patience: float = 120.0) -> float:
    """Start every worker process and load the recording in it; the seconds it took."""
    begin = time.perf_counter()
    barrier = _Barrier.remote()
    pids = ray.get([_warm_one.remote(suite, barrier, workers, patience) for _ in range(workers)])
    print(f"warmed {len(set(pids))} worker processes ({time.perf_counter() - begin:.1f} s)")
    ray.kill(barrier)
    return time.perf_counter() - begin


def slot_seconds(record: CaseRecord, works: dict[str, float]) -> float:
    """The slot-seconds a case's record stands for: its seconds, or a split case's recorded
    work (``works``, by case id: it ran over many slots)."""
    return works.get(record.id, record.seconds) if record.tasks > 1 else record.seconds


def busy_profile(
    arrivals: list[tuple[float, CaseRecord]], start: float, wall: float, workers: int, works: dict[str, float]
) -> tuple:
    """Slot-seconds ``(busy, idle while work remained, idle in the tail)`` reconstructed from the
    records: a case that took s seconds and arrived at a ran over [a - s, a] (its report may come
    up to 0.25 s late), a split case over as many slots as its work (``works``, by case id) needs.
    The tail starts at the last moment every worker was busy."""
    changes: list[tuple[float, float]] = []
    for arrival, record in arrivals:
        if record.tasks < 1 or record.seconds <= 0:
            continue
        end = min(max(arrival - start, 0.0), wall)
        begin = max(0.0, end - record.seconds)
        work = slot_seconds(record, works)
        slots = min(workers, work / max(end - begin, 1e-9))
        changes += [(begin, slots), (end, -slots)]
    segments, used, t = [], 0.0, 0.0
    for when, delta in sorted(changes):
        segments.append((t, when, min(used, workers)))
        t, used = when, used + delta
    segments.append((t, wall, min(max(used, 0.0), workers)))
    full = [end for begin, end, busy in segments if busy >= workers - 0.5 and end > begin]
    tail_from = max(full, default=0.0)
    busy = sum(u * (e - b) for b, e, u in segments)
    tail = sum((workers - u) * (e - max(b, tail_from)) for b, e, u in segments if e > tail_from)
    return busy, workers * wall - busy - tail, tail


def report(
    args, suite: ReplaySuite, result: RunResult, timeline: Timeline, driver_cpu: float, startup: dict, durations: bool
) -> None:
    workload = from_recording(suite.recording(), replay=True, scale=args.scale)
    p = result.workers
    first = getattr(result, "first_dispatch", None)
    start = timeline.started_at if first is None else timeline.run_start + first
    end = max((a for a, _ in timeline.arrivals), default=start)
    wall = end - start
    bound = max(workload.total / p, workload.longest, driver_cpu)
    works = {str(c.id): c.work * suite.scale for c in suite.recording().cases if c.split}
    _, _, tail = busy_profile(timeline.arrivals, start, wall, p, works)
    busy = sum(slot_seconds(r, works) for _, r in timeline.arrivals if r.tasks > 0)
    overrun = busy - workload.total
    starved = max(0.0, p * wall - busy - tail)
    constants = calibration.load(replay=True)
    predicted = predict(workload, p, constants, durations)
    since = "the first dispatch" if first is not None else "the listener's start (no RunResult.first_dispatch yet)"
    print(f"\nreplay of {args.report} (scale {args.scale:g}): {workload.cases:,} runnable cases", end="")
    print(f", {workload.split_cases} split; whole cases {'check' if suite.checks else 'only sleep'}")
    print(
        "start-up (apart): "
        + ", ".join(f"{k} {v:.1f} s" for k, v in startup.items())
        + f", run to first dispatch {start - timeline.run_start:.2f} s"
    )
    print(f"total case seconds {workload.total:,.2f}   P {p}   longest unsplittable {workload.longest:.2f} s", end="")
    print(f"   durations {'passed' if durations else 'not passed'}")
    parts = f"total/P {workload.total / p:.2f}, longest {workload.longest:.2f}, driver CPU {driver_cpu:.2f}"
    print(f"lower bound max({parts}) = {bound:.2f} s")
    print(f"achieved wall (from {since}): {wall:.2f} s   ratio {wall / bound:.3f}   (target <= 1.15)")
    print(f"where the difference goes ({wall - bound:+.2f} s):")
    print(f"  driver CPU during the run       {driver_cpu:8.2f} s ({driver_cpu / max(wall, 1e-9):.0%} of the wall)")
    print(f"  cases' overrun / P              {overrun / p:8.2f} s (cases took longer than recorded: waits for a core)")
    print(f"  idle while work remained / P    {starved / p:8.2f} s (Ray per-task overhead, dispatch gaps, listings)")
    print(f"  idle tail / P                   {tail / p:8.2f} s (after the last moment every worker was busy)")
    recorded = f"recorded {workload.total / p:.2f} s"
    print(f"  busy / P                        {busy / p:8.2f} s (the cases' seconds; {recorded})")
    print(
        f"simulator, same replay at P={p}: wall {predicted.wall:.2f} s (ratio {predicted.ratio:.3f}; "
        f"{predicted.wall / wall - 1:+.1%} from the replay), starved/P {predicted.starved / p:.2f} s, "
        f"tail/P {predicted.tail / p:.2f} s"
    )
    print(f"verdicts: {result.counts()} (recorded: {recorded_counts(suite)})")


def recorded_counts(suite: ReplaySuite) -> dict[str, int]:
    counts: dict[str, int] = {}
    for case in suite.recording().cases:
        counts[case.verdict] = counts.get(case.verdict, 0) + 1
    return counts


def recorded_durations(suite: ReplaySuite) -> dict:
    """``RunOptions`` arguments that pass the recorded times (scaled) as ``--durations``, as the
    nightly passes the previous night's report; none for a runner without durations."""
    if "durations" not in {f.name for f in dataclasses.fields(RunOptions)}:
        return {}  # the runner before issue 12's dispatcher
    from distcheck.storage.durations import Durations

    return {"durations": Durations({str(c.id): c.seconds * suite.scale for c in suite.recording().cases})}


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("report", help="a JSON report of distcheck run --json")
    p.add_argument("--nodes", type=int, default=4, help="Ray nodes (default: %(default)s)")
    p.add_argument("--cpus", type=int, default=16, help="logical CPUs per node (default: %(default)s)")
    p.add_argument("--scale", type=float, default=1.0, help="every recorded time times this (default: 1)")
    p.add_argument("--timeout", type=float, default=600.0, help="per case, seconds (default: %(default)s)")
    p.add_argument("--json", metavar="FILE", help="write the replay's JSON report")
    p.add_argument("--timeline", metavar="FILE", help="write when each record arrived (JSON lines)")
    p.add_argument("--no-durations", action="store_true", help="do not pass the recorded times as --durations")
    p.add_argument(
        "--checks",
        action="store_true",
        help="whole cases run a real fast-mode check too (~1 ms of CPU each: on few cores, that is measured)",
    )
    args = p.parse_args(argv)
    if args.nodes < 1 or args.cpus < 1 or args.scale <= 0:
        p.error("--nodes and --cpus: positive integers; --scale: a positive number")
    try:
        suite = replay_suite(os.path.abspath(args.report), args.scale, args.checks)
    except UsageError as e:
        print(f"bench_scale: error: {e}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _interrupt)
    cluster = LoopbackCluster(args.nodes, args.cpus)
    try:
        cluster.start()
        begin = time.perf_counter()
        ensure_ray(cluster.address, {"env_vars": dict(hash_seed.ENV)})
        startup = {"cluster": cluster.started, "join": time.perf_counter() - begin}
        startup["warm-up"] = warm(suite, cluster.workers)
        timeline = Timeline()
        durations = {} if args.no_durations else recorded_durations(suite)
        split_seconds = SPLIT_SECONDS * args.scale
        options = RunOptions(address=cluster.address, timeout=args.timeout, split_seconds=split_seconds, **durations)
        cpu = cpu_seconds()
        sampler = cpu_by_process.Sampler(every=1.0).start()
        timeline.run_start = time.perf_counter()
        result = run_suite(suite, Selection(), options, timeline)
        by_kind = sampler.stop(os.getpid())
        driver_cpu = cpu_seconds() - cpu - sampler.own_cpu
        by_kind[cpu_by_process.DRIVER] -= sampler.own_cpu
        run_wall = time.perf_counter() - timeline.run_start
        if args.json:
            json_report.write(result, args.json, sys.argv)
        if args.timeline:
            timeline.write(args.timeline)
        report(args, suite, result, timeline, driver_cpu, startup, bool(durations))
        cores = os.cpu_count() or 1
        print(f"CPU of the whole run by process ({run_wall:.2f} s on {cores} cores, {run_wall * cores:.1f} core-s):")
        for name, seconds in by_kind.most_common():
            print(f"  {seconds:8.2f} s  {name}")
        busy = sum(by_kind.values()) / (run_wall * cores)
        print(f"  the cores were {busy:.0%} busy", end="")
        print(": the replay measured this machine's cores, not the dispatcher" if busy > 0.9 else "")
    except KeyboardInterrupt:
        print("bench_scale: interrupted; stopping the cluster", file=sys.stderr)
        return 130
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
