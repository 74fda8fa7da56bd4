"""The benchmarks' own arithmetic, and the loopback cluster: it replays through the real runner
and stops exactly what it started."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from benchmarks.bench_driver import fit, fit_cases_and_wall, main, per_case_error, print_fit_apart, watch_records
from benchmarks.bench_scale import busy_profile
from benchmarks.loopback import processes_of, split_arguments
from distcheck.records import case_record as records_module
from distcheck.records.case_record import CaseRecord
from distcheck.suites.base import CaseId


def test_fit_gives_start_up_and_slope():
    intercept, slope = fit([(700, 6.0 + 700 * 2e-5), (6000, 6.0 + 6000 * 2e-5)])
    assert intercept == pytest.approx(6.0) and slope == pytest.approx(2e-5)
    with pytest.raises(ValueError, match="same number of cases"):
        fit([(10, 1.0), (10, 2.0)])


# A child that burns CPU on its main thread, writes two records, burns more (half of it on a
# second thread), writes its report, and burns a little before it exits.
_CHILD = """
import os, sys, threading, time
def burn(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass
run = sys.argv[1]
burn(0.3)
with open(os.path.join(run, "records.jsonl"), "w") as f:
    f.write("{}\\n{}\\n")
side = threading.Thread(target=burn, args=(0.4,))
side.start()
burn(0.4)
side.join()
with open(os.path.join(run, "report.json"), "w") as f:
    f.write("{}")
burn(0.3)
"""


def test_the_driver_cpu_between_its_first_record_and_its_report_is_read_apart(tmp_path):
    """``bench_driver``'s figure without the start-up and the end: the CPU between the run
    folder's first record and its report, the process's and its main thread's."""
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(tmp_path)])
    records, first, last = watch_records(child, str(tmp_path))
    child.wait()
    assert records == 2
    process, main = last[0] - first[0], last[1] - first[1]
    assert 0.6 <= process <= 1.1 and 0.3 <= main <= 0.6  # clock ticks of 10 ms, polls of 50 ms
    assert first[0] >= 0.25  # the start-up's CPU is before the first reading


def test_the_replay_fit_separates_cases_from_wall_time():
    truth = lambda cases, wall: 0.3 + 0.05 * wall + 2e-5 * cases  # noqa: E731
    runs = [
        (cases, wall, truth(cases, wall)) for cases, wall in [(2000, 11.0), (20000, 19.5), (2000, 26.0), (20000, 31.0)]
    ]
    fixed, per_second, per_case = fit_cases_and_wall(runs)
    assert (fixed, per_second, per_case) == pytest.approx((0.3, 0.05, 2e-5))
    with pytest.raises(ValueError, match="two sizes and two wall times"):
        fit_cases_and_wall([(2000, 10.0, 1.0), (4000, 20.0, 2.0), (8000, 40.0, 4.0)])  # wall follows cases
    assert per_case_error(runs[:3]) is None  # three runs, three coefficients: no residual to judge by
    again = [*runs, *runs]
    assert per_case_error(again) == pytest.approx(0.0, abs=1e-12)
    noisy = [(cases, wall, cpu + (0.05 if k < 4 else -0.05)) for k, (cases, wall, cpu) in enumerate(again)]
    assert per_case_error(noisy) > 1e-7


def test_the_real_suite_fit_over_widths_separates_cases_from_wall_time(capsys):
    """``--widths``: runs of two sizes on two widths (one runner takes twice the wall time of
    two): the driver's and its main thread's CPU a case, each apart from its CPU a second."""
    process = lambda cases, wall: 0.2 + 0.002 * wall + 1e-5 * cases  # noqa: E731
    thread = lambda cases, wall: 0.1 + 0.0005 * wall + 6e-6 * cases  # noqa: E731
    sizes = [(6000, 25.0), (27000, 100.0), (6000, 50.0), (27000, 200.0)]
    print_fit_apart([(cases, wall, process(cases, wall), thread(cases, wall)) for cases, wall in sizes])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("fit apart, the driver: 0.20 s + 2.00 ms a second + 0.0100 ms a case")
    assert lines[1].startswith("fit apart, its main thread: 0.10 s + 0.50 ms a second + 0.0060 ms a case")


@pytest.mark.parametrize(
    "argv, error",
    [
        (["--widths", "2"], "--widths: two or more positive integers"),
        (["--widths", "1,2", "--cpus", "2"], "--cpus too is one too many"),
        (["--code", "/"], "not a distcheck checkout"),
    ],
)
def test_bench_driver_refuses_bad_arguments_before_starting_ray(argv, error, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2 and error in capsys.readouterr().err


def record(seconds: float, tasks: int = 1, estimate: dict | None = None) -> CaseRecord:
    return CaseRecord(CaseId("s", "op", "float64", "grad", 0), "pass", "", seconds, tasks, estimate)


def test_busy_profile_splits_idle_time_into_gaps_and_tail():
    # two workers: both busy over [0, 2], one idle over [2, 3] (a gap), then one case over [3, 4]
    arrivals = [(2.0, record(2.0)), (2.0, record(2.0)), (4.0, record(1.0))]
    busy, starved, tail = busy_profile(arrivals, 0.0, 4.0, 2, {})
    assert (busy, starved, tail) == pytest.approx((5.0, 0.0, 3.0))
    arrivals = [(2.0, record(2.0)), (1.0, record(1.0)), (3.0, record(1.0)), (3.0, record(1.0))]
    busy, starved, tail = busy_profile(arrivals, 0.0, 3.0, 2, {})
    assert (busy, starved, tail) == pytest.approx((5.0, 1.0, 0.0))


def test_busy_profile_spreads_a_split_case_over_the_workers():
    arrivals = [(2.0, record(2.0, tasks=9, estimate={"seconds": 80.0}))]  # a busy machine's estimate
    busy, starved, tail = busy_profile(arrivals, 0.0, 2.0, 4, {"s::op::float64::sample0::grad": 8.0})
    assert (busy, starved, tail) == pytest.approx((8.0, 0.0, 0.0))


def test_a_benchmarks_arguments_end_at_the_first_double_dash():
    assert split_arguments(["--sizes", "3,6"]) == (["--sizes", "3,6"], [])
    assert split_arguments(["--repeat", "2", "--", "--mode", "slow", "--"]) == (
        ["--repeat", "2"],
        ["--mode", "slow", "--"],
    )


def test_processes_of_a_group_include_descendants():
    child = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, time; subprocess.Popen(['sleep', '30']); time.sleep(30)"],
        start_new_session=True,
    )
    try:
        for _ in range(50):
            found = processes_of([child.pid], "never-named")
            if len(found) == 2:
                break
            subprocess.run(["sleep", "0.1"])
        assert child.pid in found and len(found) == 2
        assert os.getpid() not in processes_of([os.getpgrp()], "never-named")
    finally:
        os.killpg(child.pid, 9)
        child.wait()


@pytest.mark.ray
@pytest.mark.slow
def test_a_replay_on_a_loopback_cluster_and_nothing_left_after(tmp_path):
    cases = [
        {"id": f"torch-opinfo::op{k}::float64::sample{i}::grad", "verdict": "pass", "seconds": 0.05, "tasks": 1}
        for k in range(3)
        for i in range(4)
    ]
    summary = {"suite": "torch-opinfo", "mode": "fast", "workers": 2, "seconds": 1.0}
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"summary": summary, "cases": cases}))
    code = (
        "import sys; sys.path.insert(0, '.')\n"
        "from benchmarks import bench_scale\n"
        f"sys.exit(bench_scale.main([{str(path)!r}, '--nodes', '2', '--cpus', '1', '--scale', '0.5']))\n"
    )
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "total case seconds 0.30   P 2" in done.stdout
    assert "verdicts: {'pass': 12" in done.stdout
    assert "cases' overrun / P" in done.stdout and "CPU of the whole run by process" in done.stdout
    assert "s  runners (ray::runner" in done.stdout and "the cores were" in done.stdout
    started = next(line for line in done.stdout.splitlines() if line.startswith("loopback cluster: 2 nodes"))
    root = started.split("temp dir ")[1].split(" ")[0]
    assert not os.path.exists(root)
    assert not processes_of([], root)  # no process of the cluster is left


def test_cpu_by_process_counts_the_command_and_ray_kinds():
    from benchmarks.cpu_by_process import DRIVER, OTHER, kind, measure

    parents = {10: 6, 11: 6, 6: 5, 5: 1, 12: 1}  # make (5) -> python (6) -> Ray's processes
    assert kind("ray::runner", 10, 5, parents).startswith("runners")
    assert kind("/x/ray/core/src/ray/raylet/raylet --raylet_socket_name=...", 11, 5, parents) == "raylet"
    assert kind("make check-local", 5, 5, parents) == DRIVER
    assert kind("python -m distcheck run", 6, 5, parents) == DRIVER
    assert kind("bash", 12, 5, parents) == OTHER
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass"
    wall, by_kind = measure(["sh", "-c", f"{sys.executable} -c '{spin}'"], every=0.05)  # a child's CPU: the driver's
    assert wall >= 0.5 and 0.3 <= by_kind[DRIVER] <= wall + 0.1


def test_cpu_between_two_samples_is_by_pid_and_counts_new_processes_whole():
    from benchmarks.cpu_by_process import DRIVER, used_between

    me = os.getpid()
    before = {20: ("ray::IDLE", 5.0, 1), 21: ("ray::WorkQueue", 1.0, 1), me: ("pytest", 9.0, 1)}
    after = {
        20: ("ray::runner", 7.5, 1),  # renamed itself meanwhile: still the same process
        21: ("ray::WorkQueue", 1.25, 1),
        22: ("ray::runner", 0.5, 1),  # started meanwhile
        me: ("pytest", 10.0, 1),  # this process: left out unless it is the driver
    }
    by_kind = used_between(before, after, driver=1)
    assert by_kind["runners (ray::runner, careful, IDLE)"] == pytest.approx(3.0)
    assert by_kind["the queue actor (ray::WorkQueue)"] == pytest.approx(0.25)
    assert sum(by_kind.values()) == pytest.approx(3.25)
    assert used_between(before, after, driver=me)[DRIVER] == pytest.approx(1.0)


def test_the_sampler_counts_a_process_that_ended_while_it_sampled():
    from benchmarks.cpu_by_process import OTHER, Sampler

    sampler = Sampler(every=0.05).start()
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass\ntime.sleep(0.2)"
    subprocess.run([sys.executable, "-c", spin], check=True)  # not this process's child for long: it ends
    by_kind = sampler.stop(driver=1)
    assert 0.2 <= by_kind[OTHER] and sampler.own_cpu > 0


@pytest.mark.slow
def test_the_interleaved_benchmark_times_both_loops_on_the_selected_cases():
    script = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "bench_interleaved.py")
    command = [sys.executable, script, "--ops", "mul", "--checks", "grad", "--dtypes", "float64", "--repeats", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "best of 1 alternating runs" in done.stdout and "serial per-case ratio" in done.stdout
    bad = subprocess.run([*command[:3], "nosuch"], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "unknown op 'nosuch'" in bad.stderr


def test_the_overhead_benchmark_times_every_small_check_three_ways():
    script = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "bench_check_overhead.py")
    done = subprocess.run([sys.executable, script, "--rounds", "1"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if line.strip().endswith(tuple("0123456789"))][1:]
    assert len(rows) == 6 and {row[-5] for row in rows} == {"gradcheck", "gradgradcheck"}, done.stdout


def test_the_offline_driver_makes_a_record_only_for_the_cases_its_summary_shows(monkeypatch):
    """``bench_driver --offline``: the driver's handlers on runner reports, then the run folder,
    progress, summary and JSON reports; of 640 passing cases only the ten slowest (which the
    summary prints) become record objects."""
    from benchmarks.bench_driver import offline_once

    made = []
    original = records_module._record
    monkeypatch.setattr(records_module, "_record", lambda case, *rest: made.append(case) or original(case, *rest))
    cases, cpu = offline_once(640)
    assert cases == 640 and cpu > 0
    # the slowest: each group's last sample, the first ten groups' (ties in run order)
    assert [(case.op, case.sample) for case in made] == [(f"op{k}", 31) for k in range(10)]


def test_bench_run_folder_times_a_failures_blocks_encoded_and_stored(capsys):
    """``bench_run_folder --blocks-only``: the encoding (where a case runs) and the driver's
    store of a failure's blocks at their bound, each printed."""
    from benchmarks.bench_run_folder import blocks_cost

    blocks_cost(1, s3=False, failures=2)
    out = capsys.readouterr().out
    assert "MiB encoded" in out and "encoding, where the case ran:" in out
    assert "storing, on the driver, to a local folder:" in out and "S3" not in out
