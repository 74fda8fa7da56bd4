"""The driver's CPU per case, measured alone (issue 12 item 1): Ray runs apart (its own ``ray
start --head``, in its own process group), and ``distcheck run --address ...`` runs as a child
process on a small and a larger selection (the first N ops of the suite: a selection by op
keeps enumeration on the workers, where ``--max-cases`` would list every case on the driver);
the child's CPU time (``getrusage`` of children:
the driver only, since it joins Ray rather than starting it) gives the fixed start-up CPU
(imports, joining Ray: the intercept) and the marginal driver CPU per case (the slope; target
≤ 0.02 ms). The start-up's CPU varies from run to run by more than a thousand ops' cases cost
(7.3–10.2 s for the same 150 ops), so the driver's CPU is also read (from ``/proc``) when its
run folder first holds a record and when it writes its report: between the two, the CPU per
case (and per second) with the start-up and the end left out, and its slope over the sizes.

    .venv/bin/python benchmarks/bench_driver.py                          # the first 15 and 120 ops
    .venv/bin/python benchmarks/bench_driver.py --sizes 5,20             # a quick look
    .venv/bin/python benchmarks/bench_driver.py --sizes 15,120 -- --mode slow

Arguments after ``--`` go to ``distcheck run`` as they are (e.g. ``--mode slow``, ``--ops``).
Stops the Ray it started, also on Ctrl-C and errors. ``--code DIR`` runs the driver of another
checkout (its ``distcheck``, with this script and this Python), to measure two trees alike.

``--widths`` runs every size on Ray nodes of each number of runners (one node, ``ray start`` per
width): the same cases take about twice the wall time on one runner as on two, so the CPU between
the first record and the report is fitted as fixed + per second × wall + per case × cases (the
process's and the main thread's): the per-case coefficient is the real suite's marginal driver
CPU per case at equal wall time, Ray's own driver threads (a cost per second) apart.

    .venv/bin/python benchmarks/bench_driver.py --widths 1,2 --sizes 150,400
    .venv/bin/python benchmarks/bench_driver.py --widths 1,2 --sizes 150,400 --code ../old-tree

On a cluster as small as this machine's, the driver's CPU also grows with the *wall time* (Ray's
driver threads, the dispatch loop's looks, a report per runner per second), and the wall time
grows with the cases: the slope above is per case *and* per second. ``--replay`` measures the
per-case part alone, at cluster width: this process is the driver (CPU of this process; Ray's
nodes apart), on a loopback cluster of ``--nodes`` × ``--cpus`` logical CPUs; each size is a
synthetic recording (groups of 32 cases) replayed with ``distcheck/suites/replay.py`` (cases
only sleep), every case sleeping W × P / N seconds for each W of ``--walls``. Each run writes
what ``distcheck run`` writes (the run folder, its report, a JSON report, progress). The runs
take W seconds or more (on 2 real cores, 64 runners' own CPU per case stretches the larger
replays), so CPU = fixed + per second × wall + per case × cases is fitted over all of them:
the per-case coefficient is the marginal driver CPU per case at equal wall time. Each size and
wall runs ``--repeat`` times (default 2: this machine's noise moves a single run by 20%), and
the fit's standard error is printed with it.

    .venv/bin/python benchmarks/bench_driver.py --replay     # 2,000 and 20,000 cases, 10 and 25 s, twice, 64 workers
    .venv/bin/python benchmarks/bench_driver.py --replay --sizes 2000,40000 --walls 10,30

``--offline`` measures the driver's own code per case with nothing else running: no Ray, no
runners on the same cores. Runner reports are made here as a runner makes them (a group of 32
passing cases listed and run per report, each report pickled), then the driver's handlers read
them (unpickling stands in for Ray's get), with the run folder, the progress, the summary and both
JSON reports as ``distcheck run`` writes them; the best of ``--repeat`` runs of each size, the
slope between them. It is the floor under the replay's figure, which adds what 64 runner
processes on the driver's 2 cores cost it.

    .venv/bin/python benchmarks/bench_driver.py --offline    # 2,000 and 20,000 cases, best of 5

``--messages`` measures what a runner's report costs the driver in Ray, with nothing else
running: a streaming task on a Ray started apart yields runner reports (each of 1, 8, 16 and 32
groups of 32 cases, made as ``--offline`` makes them; Ray passes those over 100 KiB through its
object store) as fast as it can, and this process reads
them as the dispatch loop does (``ray.get`` of the generator's next item); CPU of this process
per report, the best of ``--repeat`` rounds.

    .venv/bin/python benchmarks/bench_driver.py --messages   # 400 reports of each size, best of 3
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.loopback import AUTH, REPO, LoopbackCluster, cpu_seconds, split_arguments, stat_fields  # noqa: E402
from distcheck.storage.run_folder import RECORDS, REPORT  # noqa: E402


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


def run_driver(
    address: str, ops: list[str], suite: str, checks: str, extra: list[str], code: str = REPO
) -> tuple[int, float, float, int, tuple[float, float, float]]:
    """``(cases, CPU seconds, wall seconds, cases recorded after the first, CPU seconds between
    the first record and the run folder's report: the process's and its main thread's, and the
    wall seconds between the two)`` of one ``distcheck run`` child process (read from
    ``/proc``), the distcheck of the checkout ``code``: the start-up (imports, joining Ray, the
    runners' start) and the end (reports, leaving Ray) left out of the last figures; the main
    thread is the dispatch loop, the others mostly Ray's own."""
    with tempfile.TemporaryDirectory() as folder:
        report, run = os.path.join(folder, "report.json"), os.path.join(folder, "run")
        command = [sys.executable, "-m", "distcheck", "run", "--address", address, "--suite", suite]
        command += ["--checks", checks, "--ops", ",".join(ops), "--json", report, "--out", run]
        command += extra
        before, begin = children_cpu(), time.perf_counter()
        path = os.pathsep.join(filter(None, [code, os.environ.get("PYTHONPATH")]))  # ``code`` first
        env = {**os.environ, **AUTH, "PYTHONPATH": path}
        child = subprocess.Popen(command, cwd=code, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        watched = watch_records(child, run)
        _, stderr = child.communicate()
        cpu, wall = children_cpu() - before, time.perf_counter() - begin
        if child.returncode not in (0, 1):  # 1: some case failed, a run all the same
            tail = " | ".join(stderr.strip().splitlines()[-3:])
            raise RuntimeError(f"distcheck run --ops ({len(ops)} ops) exited {child.returncode}: {tail}")
        with open(report) as f:
            cases = len(json.load(f)["cases"])
    if watched is None:  # never a silent zero: the figure was not read
        raise RuntimeError(f"the run of {len(ops)} ops ended before its first record and its report were both seen")
    recorded, first, last = watched
    return cases, cpu, wall, cases - recorded, (last[0] - first[0], last[1] - first[1], last[2] - first[2])


def watch_records(child: subprocess.Popen, run: str) -> tuple[int, tuple, tuple] | None:
    """``(records, CPU, CPU)`` of ``child`` (each ``(the process's, its main thread's)``
    seconds, and ``time.monotonic()``): when its run folder ``run`` first holds a record, and
    when its report is written (all records are in); None if it ends before either. Polled
    every 50 ms (the CPU figures are in clock ticks, 10 ms)."""
    first = None

    def cpu() -> tuple[float, float, float]:
        process, main = f"/proc/{child.pid}/stat", f"/proc/{child.pid}/task/{child.pid}/stat"
        return cpu_seconds(stat_fields(process)), cpu_seconds(stat_fields(main)), time.monotonic()

    while child.poll() is None:
        try:
            if first is None:
                with open(os.path.join(run, RECORDS), "rb") as f:
                    lines = f.read().count(b"\n")
                if lines:
                    first = lines, cpu()
            elif os.path.exists(os.path.join(run, REPORT)):
                return (*first, cpu())
        except OSError:
            pass
        time.sleep(0.05)
    return None


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


def parse_sizes(p: argparse.ArgumentParser, text: str, option: str = "--sizes") -> list[int]:
    try:
        sizes = [int(s) for s in text.split(",")]
        if len(sizes) < 2 or min(sizes) < 1:
            raise ValueError
    except ValueError:
        p.error(f"{option}: two or more positive integers, comma-separated")
    return sizes


def synthetic_recording(path: str, cases: int, seconds: float) -> None:
    """A JSON report of ``cases`` passing fast-mode grad cases of ``seconds`` each, in groups of
    32 (an op in float64), for the replay suite."""
    records = []
    for k in range(cases):
        op, sample = f"op{k // 32}", k % 32
        case_id = f"bench::{op}::float64::sample{sample}::grad"
        records.append({"id": case_id, "op": op, "check": "grad", "dtype": "float64", "sample": sample})
        records[-1].update({"verdict": "pass", "message": "", "seconds": seconds, "tasks": 1})
    summary = {"suite": "bench", "mode": "fast", "executor": "ray", "workers": 1, "seconds": 0.0}
    with open(path, "w") as f:
        json.dump({"summary": summary, "cases": records}, f)


def replay_once(address: str, cases: int, workers: int, wall: float) -> tuple[int, float, float]:
    """One replay run of ``cases`` cases taking ``wall`` seconds on ``workers``, the driver in
    this process, with the listeners and reports ``distcheck run`` has: ``(cases, CPU s, wall s)``."""
    from distcheck.records.listener import Listeners
    from distcheck.reports import console, json_report
    from distcheck.runner import RunOptions, run_suite
    from distcheck.storage.run_folder import REPORT, RunWriter, run_start
    from distcheck.suites.base import Selection
    from distcheck.suites.replay import replay_suite

    with tempfile.TemporaryDirectory() as folder:
        recording = os.path.join(folder, "recording.json")
        synthetic_recording(recording, cases, wall * workers / cases)
        suite = replay_suite(recording, checks=False)
        options, selection = RunOptions(address=address), Selection()
        run = os.path.join(folder, "run")
        with open(os.devnull, "w") as quiet:
            before, begin = self_cpu(), time.perf_counter()
            start = run_start(suite.name, suite.mode, selection, options, ["bench_driver"])
            writer = RunWriter(run, start)
            listener = Listeners(console.ConsoleProgress(quiet, 15.0, False), writer)
            result = run_suite(suite, selection, options, listener)
            writer.close()
            console.summary(result)
            reports = [os.path.join(run, REPORT), os.path.join(folder, "report.json")]
            json_report.write(result, reports, ["bench_driver"])  # as distcheck run writes both
            cpu, elapsed = self_cpu() - before, time.perf_counter() - begin
    if result.counts()["pass"] != cases:
        raise RuntimeError(f"the replay of {cases} cases gave {result.counts()}")
    return cases, cpu, elapsed


def runner_reports(cases: int, group: int = 32) -> tuple[list, list[bytes]]:
    """The groups of a synthetic fast-mode suite of ``cases`` passing cases, and the pickled
    report a runner sends for each (it starts the group, lists it and runs it whole)."""
    import pickle

    from distcheck.case.run import Outcome, to_record
    from distcheck.records.case_record import RecordBatch
    from distcheck.runner.messages import Finished, Listed, Started
    from distcheck.runner.policy import Item
    from distcheck.suites.base import RUN, CaseId, CaseInfo, GroupInfo
    from distcheck.suites.case_list import CaseList

    groups, reports = [], []
    for g in range(cases // group):
        info = GroupInfo("bench", f"op{g}", "float64", ("grad",))
        item = Item(g, group=info)  # no head: the lister runs the whole group
        listing = [
            CaseInfo(CaseId("bench", f"op{g}", "float64", "grad", k), RUN, "", f"{k:016x}") for k in range(group)
        ]
        head, _ = item.divide(listing)
        outcomes = {k: Outcome("pass", "", 0.001 + k * 1e-5, f"{k:016x}") for k in head}
        done = Finished(g, len(head), RecordBatch(to_record(listing[k], outcomes[k], 1) for k in head))
        groups.append(info)
        reports.append(pickle.dumps([Started(item), Listed(g, CaseList(listing), head), done], 5))
    return groups, reports


def offline_once(cases: int) -> tuple[int, float]:
    """The driver's CPU seconds to handle the reports of ``cases`` cases and write what
    ``distcheck run`` writes (no Ray: see the module's doc); ``(cases, CPU s)``."""
    import gc
    import pickle
    import types

    from distcheck.records.listener import Listeners
    from distcheck.records.result import RunResult
    from distcheck.reports import console, json_report
    from distcheck.runner.collector import Collector
    from distcheck.runner.dispatch import Dispatch, RayDispatcher
    from distcheck.runner.options import RunConfig, RunOptions
    from distcheck.runner.pool import Runners
    from distcheck.runner.split.cases import SplitCases
    from distcheck.runner.work_queue import Enumeration
    from distcheck.storage.run_folder import REPORT, RunWriter
    from distcheck.suites.base import Selection

    groups, reports = runner_reports(cases)
    suite = types.SimpleNamespace(name="bench", mode="fast", engine="torch")
    with tempfile.TemporaryDirectory() as folder, open(os.devnull, "w") as quiet:
        gc.collect()
        before = time.process_time()
        writer = RunWriter(os.path.join(folder, "run"), {"$report_type": "RunStart"})
        listener = Listeners(console.ConsoleProgress(quiet, 15.0, False), writer)
        result = RunResult("bench", "fast", "ray", 64)
        listener.started(result)
        collector = Collector(listener)
        gc.freeze()
        # the dispatch's handlers, without the Ray it starts with: no queue, no coordinators
        config = RunConfig(RunOptions(), suite, Selection(), workers=64)
        runners = Runners(config, None, None, None, collector)
        splits = SplitCases(config, None, None, None, collector)
        dispatcher = RayDispatcher(suite, RunOptions())
        dispatch = Dispatch(dispatcher, config, Enumeration(iter(())), None, runners, splits, collector)
        for _ in collector.enumerate(iter(groups)):
            pass
        runners.track("runner")
        for k, report in enumerate(reports):
            dispatch.report("runner", pickle.loads(report))
            if k % 16 == 15:  # as the dispatch loop does after each round of messages
                gc.freeze()
        result.records = collector.result()
        result.complete = collector.complete
        listener.finished(result)
        console.summary(result)
        json_report.write(result, [os.path.join(folder, "run", REPORT), os.path.join(folder, "report.json")], ["b"])
        cpu = time.process_time() - before
        gc.unfreeze()
    if result.counts()["pass"] != len(groups) * 32 or not result.complete:
        raise RuntimeError(f"the offline run of {cases} cases gave {result.counts()}")
    return len(groups) * 32, cpu


def offline_main(args: argparse.Namespace, p: argparse.ArgumentParser) -> int:
    sizes = parse_sizes(p, args.sizes or "2000,20000")
    repeat = args.repeat or 5
    best: dict[int, tuple[int, float]] = {}
    for _ in range(repeat):
        for size in sizes:
            cases, cpu = offline_once(size)
            if size not in best or cpu < best[size][1]:
                best[size] = (cases, cpu)
    print(f"{'cases':>8} {'driver CPU ms':>14} {'us/case':>8}   (best of {repeat}, no Ray: the driver's code alone)")
    for cases, cpu in best.values():
        print(f"{cases:>8} {1000 * cpu:>14.1f} {1e6 * cpu / cases:>8.2f}")
    intercept, slope = fit(list(best.values()))
    per_case = f"{1e6 * slope:.2f} us ({1000 * slope:.4f} ms)"
    print(f"marginal driver CPU per case, offline: {per_case}; fixed {1000 * intercept:.1f} ms")
    return 0


def messages_main(args: argparse.Namespace) -> int:
    repeat = args.repeat or 3
    cluster = LoopbackCluster(nodes=1, cpus=2)
    return on_cluster(cluster, functools.partial(message_runs, repeat=repeat))


def message_runs(cluster: LoopbackCluster, repeat: int, reports: int = 400) -> None:
    import pickle

    os.environ.update(AUTH)
    import ray

    from distcheck import hash_seed
    from distcheck.executors.ray_executor import ensure_ray

    ensure_ray(cluster.address, {"env_vars": dict(hash_seed.ENV)})

    @ray.remote(num_cpus=1, num_returns="streaming")
    def runner(reports_of: list, count: int):
        for k in range(count):
            yield reports_of[k % len(reports_of)]

    print(f"{'groups a report':>16} {'cases':>6} {'bytes':>8} {'driver CPU us/report':>21} {'us/case':>8}")
    for groups in (1, 8, 16, 32):
        _, made = runner_reports(32 * 8 * groups)
        events = [pickle.loads(r) for r in made]
        per_report = [sum(events[k : k + groups], []) for k in range(0, len(events), groups)]
        size = sum(len(pickle.dumps(r, 5)) for r in per_report) / len(per_report)
        ref = ray.put(per_report)
        best = None
        for _ in range(repeat + 1):  # the first round warms the worker
            generator = runner.remote(ref, reports)
            before = self_cpu()
            for item in generator:
                ray.get(item)
            cpu = self_cpu() - before
            best = cpu if best is None else min(best, cpu)
        per = 1e6 * best / reports
        print(f"{groups:>16} {32 * groups:>6} {size:>8.0f} {per:>21.0f} {per / (32 * groups):>8.2f}")


def self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def replay_main(args: argparse.Namespace, p: argparse.ArgumentParser) -> int:
    sizes = parse_sizes(p, args.sizes or "2000,20000")
    cpus = args.cpus or 16
    try:
        walls = [float(w) for w in args.walls.split(",")]
    except ValueError:
        walls = []
    if args.nodes < 1 or cpus < 1 or len(walls) < 2 or not min(walls) > 0:
        p.error("--nodes, --cpus: positive integers; --walls: two or more positive numbers, comma-separated")
    cluster = LoopbackCluster(nodes=args.nodes, cpus=cpus)
    return on_cluster(cluster, functools.partial(replay_runs, sizes=sizes, walls=walls, repeat=args.repeat or 2))


def replay_runs(cluster: LoopbackCluster, sizes: list[int], walls: list[float], repeat: int = 1) -> None:
    os.environ.update(AUTH)
    from distcheck import hash_seed
    from distcheck.executors.ray_executor import ensure_ray

    begin, before = time.perf_counter(), self_cpu()
    ensure_ray(cluster.address, {"env_vars": dict(hash_seed.ENV)})
    took = time.perf_counter() - begin
    print(f"joining Ray and warming {cluster.workers} workers (apart): {took:.1f} s, {self_cpu() - before:.2f} s CPU")
    replay_once(cluster.address, 64, cluster.workers, 1.0)  # the first run's one-time imports, apart
    runs = []
    print(f"{'cases':>8} {'driver CPU s':>13} {'wall s':>8} {'CPU ms/case':>12}")
    for _ in range(repeat):
        for wall in walls:
            for size in sizes:
                cases, cpu, elapsed = replay_once(cluster.address, size, cluster.workers, wall)
                runs.append((cases, elapsed, cpu))
                print(f"{cases:>8} {cpu:>13.2f} {elapsed:>8.1f} {1000 * cpu / cases:>12.3f}", flush=True)
    fixed, per_second, per_case = fit_cases_and_wall(runs)
    print(f"fit: driver CPU = {fixed:.2f} s + {per_second * 1000:.1f} ms per second of wall + per case")
    error = per_case_error(runs)
    spread = "" if error is None else f" ± {1000 * error:.4f} (one standard error, {len(runs)} runs)"
    where = f"at {cluster.workers} workers"
    print(f"marginal driver CPU per case {where}: {1000 * per_case:.4f} ms{spread} (target <= 0.02 ms)")


def _design(runs: list[tuple[int, float, float]]):
    import numpy as np

    design = np.array([[1.0, wall, cases] for cases, wall, _ in runs])
    if len(runs) < 3 or np.linalg.matrix_rank(design) < 3:
        raise ValueError("the fit needs runs of at least two sizes and two wall times (--sizes; --walls or --widths)")
    return design, np.array([cpu for *_, cpu in runs])


def fit_cases_and_wall(runs: list[tuple[int, float, float]]) -> tuple[float, float, float]:
    """Least-squares ``(fixed, per second, per case)`` of CPU seconds over ``(cases, wall s, CPU s)``
    runs. On a 2-core loopback cluster the larger replays take longer than asked (the runners'
    own CPU per case), so the wall time is a variable of its own, not a constant that cancels."""
    import numpy as np

    design, cpu = _design(runs)
    solution, *_ = np.linalg.lstsq(design, cpu, rcond=None)
    return float(solution[0]), float(solution[1]), float(solution[2])


def per_case_error(runs: list[tuple[int, float, float]]) -> float | None:
    """The standard error of the fit's per-case coefficient (from the residuals; None with no
    more runs than coefficients; four runs leave one degree of freedom, too few to judge by —
    ``--repeat`` gives the fit more)."""
    import numpy as np

    design, cpu = _design(runs)
    if len(runs) <= 3:
        return None
    solution, *_ = np.linalg.lstsq(design, cpu, rcond=None)
    residual = cpu - design @ solution
    variance = float(residual @ residual) / (len(runs) - 3)
    return float(np.sqrt(variance * np.linalg.inv(design.T @ design)[2, 2]))


def on_cluster(cluster: LoopbackCluster, body) -> int:
    """Start ``cluster``, run ``body(cluster)``, stop what was started (also on Ctrl-C, errors)."""
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        cluster.start()
        body(cluster)
    except KeyboardInterrupt:
        print("bench_driver: interrupted; stopping Ray", file=sys.stderr)
        return 130
    except (RuntimeError, ValueError) as e:
        print(f"bench_driver: error: {e}", file=sys.stderr)
        return 1
    finally:
        if "ray" in sys.modules and sys.modules["ray"].is_initialized():
            sys.modules["ray"].shutdown()
        cluster.stop()
    return 0


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    ours, extra = split_arguments(argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", help="ops per run: the suite's first N (default: 15,120); --replay: cases (1000,20000)")
    p.add_argument("--suite", default="torch-opinfo")
    p.add_argument("--checks", default="grad,gradgrad")
    p.add_argument("--cpus", type=int, help="logical CPUs per Ray node (default: this machine's; --replay: 16)")
    p.add_argument("--replay", action="store_true", help="the per-case part alone, on a replay of equal wall time")
    p.add_argument("--nodes", type=int, default=4, help="--replay: Ray nodes (default: %(default)s)")
    p.add_argument("--walls", default="10,25", help="--replay: seconds the runs take, each size each (%(default)s)")
    p.add_argument("--widths", help="runners a run (its Ray node's CPUs), each size each: the CPU a case fitted apart")
    p.add_argument("--code", help="the checkout whose distcheck runs the driver (default: this one)")
    p.add_argument(
        "--repeat",
        type=int,
        help="runs: of each size and width (1); --replay, each size and wall (2); --offline (5); --messages (3)",
    )
    p.add_argument("--offline", action="store_true", help="the driver's code alone, on runner reports made here")
    p.add_argument("--messages", action="store_true", help="a runner report's cost to the driver in Ray, alone")
    args = p.parse_args(ours)
    if args.repeat is not None and args.repeat < 1:
        p.error("--repeat: a positive integer")
    if args.offline:
        return offline_main(args, p)
    if args.messages:
        return messages_main(args)
    if args.replay:
        return replay_main(args, p)
    sizes = parse_sizes(p, args.sizes or "15,120")
    widths = [args.cpus or os.cpu_count()]
    if args.widths:
        widths = parse_sizes(p, args.widths, "--widths")
        if args.cpus:
            p.error("--widths gives the runners of each run's Ray node: --cpus too is one too many")
    code = os.path.abspath(args.code or REPO)
    if not os.path.isfile(os.path.join(code, "distcheck", "__main__.py")):
        p.error(f"--code {args.code}: not a distcheck checkout (no distcheck/__main__.py there)")
    runs: list[tuple[int, float, float, float]] = []
    body = functools.partial(
        driver_runs, sizes=sizes, suite=args.suite, checks=args.checks, extra=extra, code=code, runs=runs
    )
    for _ in range(args.repeat or 1):
        for width in widths:
            if status := on_cluster(LoopbackCluster(nodes=1, cpus=width), body):
                return status
    if len(widths) > 1:
        print_fit_apart(runs)
    return 0


def driver_runs(
    cluster: LoopbackCluster,
    sizes: list[int],
    suite: str,
    checks: str,
    extra: list[str],
    code: str,
    runs: list,
) -> None:
    """Each size's run on ``cluster``, a line each, and the fits over them; each run's
    ``(cases after the first record, wall s, CPU s, main thread's CPU s)`` between its first
    record and its report is appended to ``runs``."""
    points, after, main_thread = [], [], []
    ops = first_ops(suite, max(sizes))
    print(f"{cluster.workers} runner(s), distcheck of {code}")
    print(
        f"{'ops':>12} {'cases':>7} {'driver CPU s':>13} {'wall s':>8} {'CPU ms/case':>12}"
        f" {'1st record→report, ms/case: all':>32} {'main thread':>12} {'its wall s':>11}"
    )
    for size in sizes:
        measured = run_driver(cluster.address, ops[:size], suite, checks, extra, code)
        cases, cpu, wall, later, (later_cpu, later_main, later_wall) = measured
        points.append((cases, cpu))
        after.append((later, later_cpu))
        main_thread.append((later, later_main))
        runs.append((later, later_wall, later_cpu, later_main))
        print(
            f"{size:>12} {cases:>7} {cpu:>13.2f} {wall:>8.1f} {1000 * cpu / cases:>12.3f}"
            f" {1000 * later_cpu / max(later, 1):>32.4f} {1000 * later_main / max(later, 1):>12.4f}"
            f" {later_wall:>11.1f}",
            flush=True,
        )
    intercept, slope = fit(points)
    print(f"fixed start-up CPU (imports, joining Ray): {intercept:.2f} s")
    print(f"marginal driver CPU per case (per second too, on a cluster this small): {1000 * slope:.4f} ms")
    _, slope_after = fit(after)
    _, slope_main = fit(main_thread)
    print(
        f"the same between the first record and the report (start-up and end left out): {1000 * slope_after:.4f} ms"
        f" (the main thread {1000 * slope_main:.4f} ms)"
    )


def print_fit_apart(runs: list[tuple[int, float, float, float]]) -> None:
    """The CPU between the first record and the report, over runs of several sizes on several
    widths (a width's runs take the wall time its runners need): fixed + per second × wall +
    per case × cases, the process's and the main thread's."""
    for name, column in (("the driver", 2), ("its main thread", 3)):
        points = [(run[0], run[1], run[column]) for run in runs]
        fixed, per_second, per_case = fit_cases_and_wall(points)
        error = per_case_error(points)
        spread = "" if error is None else f" ± {1000 * error:.4f} (one standard error, {len(runs)} runs)"
        print(
            f"fit apart, {name}: {fixed:.2f} s + {1000 * per_second:.2f} ms a second"
            f" + {1000 * per_case:.4f} ms a case{spread} (target <= 0.02 ms a case)"
        )


if __name__ == "__main__":
    sys.exit(main())
