"""A split case's efficiency and every process's peak memory, from real `distcheck run`s.

Runs one slow-mode case (default: `nn.functional.ctc_loss` float64 sample 0, the slow grad
suite's longest kind of split case) in one process (`--serial`: its work) and split over the
workers of a new local Ray (`--workers`, default 2), as subprocesses, each round in turn:

    .venv/bin/python benchmarks/bench_split.py                          # this checkout, 2 rounds
    .venv/bin/python benchmarks/bench_split.py --code /tmp/old --code . # two code trees, alternating
    .venv/bin/python benchmarks/bench_split.py -- --no-vectorize         # arguments for distcheck run
    .venv/bin/python benchmarks/bench_split.py --whole-suite --repeat 1 --report slowgrad.json
                                                # the slow grad suite on Ray: every process's memory
    .venv/bin/python benchmarks/bench_split.py --whole-suite --repeat 1 --no-probe
                                                # the same without the probe: what the probe costs

Every process of a run (the command and its descendants: Ray's processes and workers) is
sampled from ``/proc`` every ``--every`` seconds: its CPU time and its resident memory, private
(``RssAnon``) and shared (``RssShmem``: the pages of Ray's object store it touched, which hold
the chunks' results: the cluster's memory, counted once, not the process's). Printed per run:

- wall: the case's seconds in one process, and the split run's from its first dispatch to its
  end (the run's report); **efficiency** = one-process seconds / (workers × split seconds);
- CPU (on a loaded machine the wall times measure the other jobs as much as distcheck): the
  one-process run's CPU over the case, and the split run's CPU from its first dispatch, all its
  processes together and by kind (chunk tasks, runners, the coordinator, Ray's own processes,
  the driver); **CPU efficiency** = one-process CPU / split CPU, of all the processes and of
  the case's own (driver, runners, coordinator, chunk tasks and block jobs: not Ray's processes
  and idle workers, whose CPU grows with the wall time on a loaded machine);
- memory: per kind of process, the largest private peak of one process and its growth over what
  it held at the first dispatch (a process started later: over a warm worker's), against the
  block budget (`--block-mb`, passed as ``$DISTCHECK_BLOCK_MB``) plus the case's inputs;
- with ``--whole-suite``, each piece's memory, exactly (``benchmarks/memory_probe.py``, every
  case, split case, chunk and block job): the largest growth of its process's resident memory
  while it ran, and the pieces that grew it by more than the block budget plus their case's
  inputs (the sampling above sees every 0.5 s, and what a process kept from earlier pieces);
  and the CPU of the pieces' own threads, per kind (``--no-probe``: none of this, the suite's
  wall and CPU without the probe's sampling).

A process counts as the kinds it was seen as (a Ray worker renames itself for every task).
Linux only. Nothing is written in the checkout: reports go to a temporary folder.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

MEMORY_SUITE = "benchmarks.bench_split:MemorySuite"
MEMORY_SIZE = 4000  # input (and output) elements of MemorySuite's case: Jacobians of 128 MB each
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks import memory_probe  # noqa: E402
from benchmarks.loopback import cpu_seconds, proc_entries, split_arguments  # noqa: E402
from distcheck.hash_seed import ENV as HASH_SEED_ENV  # noqa: E402

KINDS = (  # (what a process's command line contains, its kind), the first match wins; old code's names too
    ("ray::_run_units", "chunk tasks"),
    ("ray::_run_job", "block jobs"),
    ("ray::runner", "runners"),
    ("ray::careful", "runners"),
    ("ray::_runner", "runners"),
    ("ray::_careful", "runners"),
    ("ray::Coordinator", "coordinator"),
    ("ray::run_split", "coordinator"),
    ("ray::IDLE", "idle workers"),
    ("ray::", "other Ray tasks and actors"),
    ("raylet", "Ray's processes"),
    ("gcs_server", "Ray's processes"),
    ("default_worker.py", "idle workers"),
    ("ray/", "Ray's processes"),
)


CASE_KINDS = {"chunk tasks", "block jobs", "runners", "coordinator", "driver"}  # not Ray's own, not idle


def kind_of(command: str, pid: int, driver: int) -> str:
    for part, name in KINDS:
        if part in command:
            return name
    return "driver" if pid == driver else "other"


@dataclass
class Seen:
    """One process as sampled: CPU so far, the largest private and shared resident memory seen
    (kB), its kinds."""

    cpu: float = 0.0
    peak_kb: int = 0
    shared_kb: int = 0
    kinds: set[str] = field(default_factory=set)


def _status_kb(pid: int) -> tuple[int, int]:
    """``(RssAnon, RssShmem)`` in kB: private memory, and the shared memory it has touched (a Ray
    worker's pages of the object store, which hold the chunks' results: the cluster's memory,
    not the process's); (0, 0) if the process is gone."""
    anon = shmem = 0
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    anon = int(line.split()[1])
                elif line.startswith("RssShmem:"):
                    shmem = int(line.split()[1])
    except OSError:
        pass
    return anon, shmem


def _table() -> dict[int, tuple[int, float, str]]:
    """Every process: pid -> (parent pid, CPU seconds, command line)."""
    return {
        pid: (int(fields[1]), cpu_seconds(fields), command.replace("\0", " "))
        for pid, fields, command in proc_entries()
    }


class Sampler(threading.Thread):
    """Samples the processes descended from ``root`` every ``every`` seconds: a time series of
    their total CPU (and by kind), and each one's :class:`Seen`."""

    def __init__(self, root: int, every: float, report: str):
        super().__init__(daemon=True)
        self.root, self.every, self.report = root, every, report
        self.reported: float | None = None  # when the report appeared: the run's end (Ray's shutdown follows)
        self.seen: dict[int, Seen] = {}
        self.series: list[tuple[float, float, dict[str, float]]] = []  # (time, CPU, CPU by kind)
        self.marks: dict[float, dict[int, int]] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while True:
            self.sample()
            if self.done.wait(self.every):
                break
        self.sample()

    def sample(self) -> None:
        now, table = time.monotonic(), _table()
        if self.reported is None and os.path.exists(self.report):
            self.reported = now
        children = collections.defaultdict(list)
        for pid, (parent, _, _) in table.items():
            children[parent].append(pid)
        ours, stack = [], [self.root]
        while stack:
            pid = stack.pop()
            if pid in table:
                ours.append(pid)
                stack.extend(children[pid])
        by_kind: dict[str, float] = collections.defaultdict(float)
        for pid in ours:
            _, cpu, command = table[pid]
            anon, shmem = _status_kb(pid)
            seen = self.seen.setdefault(pid, Seen())
            kind = kind_of(command, pid, self.root)
            by_kind[kind] += cpu - seen.cpu
            seen.cpu, seen.peak_kb, seen.shared_kb = cpu, max(seen.peak_kb, anon), max(seen.shared_kb, shmem)
            seen.kinds.add(kind)
            self.marks.setdefault(now, {})[pid] = anon
        total = sum(s.cpu for s in self.seen.values())
        self.series.append((now, total, dict(by_kind)))


@dataclass
class Run:
    wall: float  # the command's own wall time
    report: dict
    sampler: Sampler
    ended: float  # monotonic time at the end

    @property
    def summary(self) -> dict:
        return self.report["summary"]

    @property
    def case_seconds(self) -> float:
        return self.report["cases"][0]["seconds"] if "cases" in self.report else self.summary["seconds"]

    def window(self, seconds: float) -> tuple[float, float, dict[str, float]]:
        """CPU in the last ``seconds`` before the end: total, start time, by kind."""
        start = self.ended - seconds
        series = self.sampler.series
        before = max((s for s in series if s[0] <= start), key=lambda s: s[0], default=series[0])
        total = series[-1][1] - before[1]
        by_kind: dict[str, float] = collections.defaultdict(float)
        for when, _, kinds in series:
            if when > before[0]:
                for kind, cpu in kinds.items():
                    by_kind[kind] += cpu
        return total, before[0], by_kind


def run(command: list[str], env: dict, every: float) -> Run:
    with tempfile.TemporaryDirectory(prefix="bench_split-") as folder:
        report = os.path.join(folder, "report.json")
        full = [*command, "--json", report, "--out", os.path.join(folder, "run")]
        begin = time.monotonic()
        child = subprocess.Popen(full, env=env, cwd=folder, stdout=subprocess.DEVNULL, start_new_session=True)
        sampler = Sampler(child.pid, every, report)
        sampler.start()
        try:
            child.wait()
        except BaseException:
            os.killpg(child.pid, signal.SIGTERM)
            raise
        finally:
            sampler.done.set()
            sampler.join()
        ended = sampler.reported or time.monotonic()
        if not os.path.exists(report):  # e.g. Ray's node timed out starting on a loaded machine
            raise RuntimeError(f"the run wrote no report (exit status {child.returncode}): {' '.join(command)}")
        with open(report) as f:
            data = json.load(f)
    return Run(ended - begin, data, sampler, ended)


def run_again(command: list[str], env: dict, every: float, tries: int = 3) -> Run:
    """:func:`run`, up to ``tries`` times while a run writes no report."""
    for attempt in range(tries):
        try:
            return run(command, env, every)
        except RuntimeError as e:
            if attempt == tries - 1:
                raise
            print(f"    {e}; once more")
    raise AssertionError("unreachable")


# a process that was several kinds (a Ray worker renames itself per task) counts as the first here
PRIMARY = ("coordinator", "block jobs", "chunk tasks", "runners", "driver", "other Ray tasks and actors")
WORKERS = ("coordinator", "block jobs", "chunk tasks", "runners", "other Ray tasks and actors", "idle workers")


def memory(run_: Run, since: float) -> tuple[int, dict[str, tuple[int, int, int]]]:
    """``(warm, per kind: (the largest private peak of one process, the largest growth of one,
    the most shared memory one touched))``, in kB: ``warm`` is the most private memory a Ray
    worker process held at ``since`` (the first dispatch: torch and the suite loaded), and a
    process's growth is its private peak over what it held at ``since`` — over ``warm`` for a
    process started later."""
    marks = sorted(run_.sampler.marks.items())
    at = next((held for when, held in marks if when >= since), {})
    seen = run_.sampler.seen
    warm = max((at[pid] for pid, s in seen.items() if pid in at and s.kinds & set(WORKERS)), default=0)
    out: dict[str, tuple[int, int]] = {}
    for pid, process in seen.items():
        kind = next((k for k in PRIMARY if k in process.kinds), None)
        if kind is None:
            continue  # Ray's own processes, idle workers
        peak, growth, shared = out.get(kind, (0, 0, 0))
        grown = process.peak_kb - at.get(pid, warm)
        out[kind] = (max(peak, process.peak_kb), max(growth, grown), max(shared, process.shared_kb))
    return warm, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default="torch-opinfo", help=f"the suite (or {MEMORY_SUITE}: see MemorySuite)")
    parser.add_argument("--op", default="nn.functional.ctc_loss")
    parser.add_argument("-k", dest="key", default="float64::sample0::grad", help="the case (a substring of its id)")
    parser.add_argument("--checks", default="grad")
    parser.add_argument("--workers", type=int, default=2, help="CPUs of the local Ray (default 2)")
    parser.add_argument("--code", action="append", help="a code tree to run (repeatable; default this checkout)")
    parser.add_argument("--repeat", type=int, default=2, help="rounds (default 2)")
    parser.add_argument("--block-mb", type=float, default=64.0, help="$DISTCHECK_BLOCK_MB (default 64)")
    parser.add_argument("--every", type=float, default=0.5, help="seconds between samples (default 0.5)")
    parser.add_argument("--no-serial", action="store_true", help="split runs only (memory)")
    parser.add_argument(
        "--whole-suite",
        action="store_true",
        help="the whole slow suite of --checks on Ray (not one case; implies --no-serial): its peak memory",
    )
    parser.add_argument(
        "--no-probe",
        action="store_true",
        help="with --whole-suite: no memory probe (the suite's wall and CPU as a run has them: the probe's cost)",
    )
    parser.add_argument("--report", metavar="FILE", help="keep the (last) split run's JSON report as FILE")
    ours, extra = split_arguments(argv)  # extra: for every distcheck run, as they are
    args = parser.parse_args(ours)
    if args.no_probe and not args.whole_suite:
        parser.error("--no-probe goes with --whole-suite (one case's run has no probe)")
    codes = [os.path.abspath(c) for c in args.code or [ROOT]]
    base = [sys.executable, "-m", "distcheck", "run", "--suite", args.suite, "--mode", "slow", "--checks", args.checks]
    if args.whole_suite:
        args.no_serial = True
    else:
        base += ["--ops", args.op, "--dtypes", "float64,complex128", "-k", args.key]
    base += extra
    with open("/proc/loadavg") as f:
        print(f"load average at the start: {f.read().split()[:3]}, {os.cpu_count()} cores")
    for round_ in range(args.repeat):
        if not args.no_serial:
            env = {**os.environ, "PYTHONPATH": f"{codes[0]}:{ROOT}", "OMP_NUM_THREADS": "1"}
            one = run_again([*base, "--serial"], {**env, **HASH_SEED_ENV}, args.every)
            cpu, _, _ = one.window(one.case_seconds)
            print(f"round {round_ + 1}, one process: case {one.case_seconds:.1f} s, CPU {cpu:.1f} s")
        for code in codes:
            env = {**os.environ, "PYTHONPATH": f"{code}:{ROOT}", "DISTCHECK_BLOCK_MB": f"{args.block_mb:g}"}
            probed = args.whole_suite and not args.no_probe
            probes = tempfile.TemporaryDirectory(prefix="bench_split-probe-") if probed else None
            if probes is not None:
                env[memory_probe.ENV] = probes.name  # the code before the probe hook reads it alone
                env["DISTCHECK_PROBE"] = memory_probe.SPEC
            split = run_split(base, env, args.workers, args.every)
            window = split.summary["seconds"] - split.summary["first_dispatch"]
            total, since, by_kind = split.window(window)
            if args.report:
                with open(args.report, "w") as f:
                    json.dump(split.report, f)
            if args.whole_suite:
                print(
                    f"round {round_ + 1}, {code}: {suite_line(split.report)}; {window:.1f} s from the first "
                    f"dispatch on {args.workers} workers, CPU {total:.1f} s"
                )
            else:
                case = split.report["cases"][0]
                print(
                    f"round {round_ + 1}, {code}: split over {args.workers}: {case['verdict']} in {case['tasks']} "
                    f"tasks, {window:.1f} s from the first dispatch (the case's record {case['seconds']:.1f} s), "
                    f"CPU {total:.1f} s"
                )
            own = sum(v for k, v in by_kind.items() if k in CASE_KINDS)
            if not args.no_serial:
                print(
                    f"    efficiency {one.case_seconds / (args.workers * window):.3f} (wall), "
                    f"{cpu / total:.3f} (CPU, all processes), {cpu / own:.3f} (CPU, the case's: {own:.1f} s)"
                )
            print(
                "    CPU by kind: "
                + ", ".join(f"{k} {v:.1f} s" for k, v in sorted(by_kind.items(), key=lambda x: -x[1]))
            )
            warm, by_process = memory(split, since)
            print(
                f"    peak private memory of one process, its growth over what it held at the first dispatch "
                f"(one started later: over a warm worker's {warm / 1024:.0f} MB), and the object store's pages it "
                f"touched; block budget {args.block_mb:g} MB:"
            )
            for kind, (peak, growth, shared) in sorted(by_process.items()):
                print(
                    f"    {kind:28s} peak {peak / 1024:7.1f} MB, growth {growth / 1024:7.1f} MB, "
                    f"shared {shared / 1024:7.1f} MB"
                )
            if probes is not None:
                print_pieces(memory_probe.read(probes.name), args.block_mb * 2**20)
                probes.cleanup()
    return 0


def print_pieces(pieces: list[dict], budget: float) -> None:
    """Per kind of piece (benchmarks/memory_probe.py), the largest growth of its process's
    private memory while one ran (and of its resident memory, which counts the object store's
    pages it read), the pieces whose private growth exceeds the block budget plus their case's
    inputs, and the CPU of the pieces' own threads (a split case's: its coordinator's work, not
    its chunks')."""
    print(
        f"    each piece measured in its process: the largest growth of private memory over what the process held "
        f"before it (resident memory, object store pages included); block budget {budget / 2**20:g} MB:"
    )

    def private(p: dict) -> int:
        return p["private_peak"] - p["private_before"]

    over_all = []
    for kind in ("case", "split case", "chunk", "block job"):
        of_kind = [p for p in pieces if p["kind"] == kind]
        if not of_kind:
            continue
        grown = max(of_kind, key=private)
        resident = max(p["peak"] - p["before"] for p in of_kind)
        over = [p for p in of_kind if private(p) > budget + p["inputs"]]
        over_all += over
        cpu = sum(p.get("cpu", 0.0) for p in of_kind)
        print(
            f"    {kind:10s} {len(of_kind):6,}: {private(grown) / 2**20:6.1f} MB ({resident / 2**20:6.1f} MB), "
            f"{grown['what']}, inputs {grown['inputs'] / 2**20:.1f} MB; over the budget + inputs: {len(over)}; "
            f"CPU of their threads {cpu:.1f} s"
        )
    for p in sorted(over_all, key=lambda p: p["inputs"] - private(p))[:10]:
        print(f"      over: {p['kind']} {p['what']}: {private(p) / 2**20:.1f} MB, inputs {p['inputs'] / 2**20:.1f} MB")


def suite_line(report: dict) -> str:
    """A whole suite's run in a line: its cases by verdict, how many split, the largest
    Jacobians of a case that ran (its estimate's)."""
    cases = report["cases"]
    verdicts = collections.Counter(c["verdict"] for c in cases)
    split = [c for c in cases if c.get("tasks", 0) > 1]
    largest = max((c.get("estimate") or {}).get("bytes", 0) for c in cases if c.get("tasks", 0) > 0) if cases else 0
    counts = ", ".join(f"{n:,} {v}" for v, n in verdicts.most_common())
    return f"{len(cases):,} cases ({counts}), {len(split)} split, the largest Jacobians {largest / 2**20:,.1f} MB"


def run_split(base: list[str], env: dict, workers: int, every: float) -> Run:
    """The case on a new local Ray of ``workers`` CPUs (a Ray that ``distcheck run`` starts
    itself uses every core: it is started here, in the command's process tree, instead). The
    run's hash seed is set here: `distcheck run` would re-execute itself to set it, leaving
    that Ray behind, idle (its processes counted in the run's CPU)."""
    env = {**env, **HASH_SEED_ENV}
    if workers == len(os.sched_getaffinity(0)):
        return run_again(base, env, every)  # distcheck's own Ray has as many CPUs
    script = (
        "import sys, ray, runpy; "
        f"ray.init(address='local', num_cpus={workers}, include_dashboard=False, "
        "runtime_env={'env_vars': {'OMP_NUM_THREADS': '1', 'OPENBLAS_NUM_THREADS': '1', 'MKL_NUM_THREADS': '1'}}); "
        "sys.argv = ['distcheck', *sys.argv[1:]]; "
        "runpy.run_module('distcheck', run_name='__main__')"
    )
    return run_again([sys.executable, "-c", script, *base[3:]], env, every)


def _sleepy_sin(x):
    """sin, each evaluation 1 ms longer (a sleep: no CPU), so that the case is long enough to split."""
    import torch

    time.sleep(0.001)
    return torch.sin(x)


class MemorySuite:
    """A suite of one slow-mode case whose Jacobians exceed the default block budget: the
    gradcheck of sin on ``MEMORY_SIZE`` elements (numerical and analytical Jacobians of 128 MB
    each), every evaluation sleeping 1 ms (about 8 s of estimated work: it splits, and costs
    little CPU). ``--suite benchmarks.bench_split:MemorySuite --op sin -k sin``."""

    name, engine = "bench-memory", "torch"
    groups = list_group = None  # enumerated on the driver

    def __init__(self, mode: str = "slow"):
        self.mode = mode

    def prepare(self) -> None:
        pass

    def cases(self, selection) -> Iterator:
        from distcheck.suites.base import RUN, CaseId, CaseInfo

        case = CaseId(self.name, "sin", "float64", "grad", 0)
        if selection.wants(case):
            yield CaseInfo(case, RUN, "", "sin")

    def build(self, case):
        import torch

        from distcheck.suites.base import BuiltCase, CheckCall

        x = torch.linspace(0.1, 0.9, MEMORY_SIZE, dtype=torch.float64).requires_grad_()
        return BuiltCase(case, _sleepy_sin, (x,), (CheckCall("gradcheck", {"fast_mode": False}),), "sin")


if __name__ == "__main__":
    sys.exit(main())
