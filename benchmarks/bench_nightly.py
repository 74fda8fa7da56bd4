"""PyTorch's gradient nightly, three ways on this machine: the two unmodified test files under
plain ``pytest`` and ``pytest -n 2``, and ``distcheck run`` on the same check kinds, in one
run: wall times, ratios, and the outcome of every PyTorch test both ran (exit 1 on any
difference, or on a test that pytest runs and distcheck does not).

    python benchmarks/bench_nightly.py --pytorch-tests DIR [--ops sinh,mm] [--checks grad,gradgrad]
    python benchmarks/bench_nightly.py --pytorch-tests DIR --mode slow --ops ...
    python benchmarks/bench_nightly.py --pytest-junit earlier.xml [--distcheck-json report.json]

``DIR`` holds ``test_ops_gradients.py`` and ``test_ops_fwd_gradients.py`` (a PyTorch checkout's
``test/``). Slow mode runs pytest with ``PYTORCH_TEST_WITH_SLOW_GRADCHECK=1`` against
``distcheck run --mode slow``. ``--ops`` restricts both sides (pytest through ``-k`` of the ops'
test names). ``--pytest-junit FILE`` compares with a JUnit XML of an earlier plain-pytest run
instead of running pytest (no pytest timings then); ``--distcheck-json`` likewise takes an
earlier distcheck JSON report (or run folder) instead of running distcheck.

A test's distcheck outcome is the aggregate of its cases (see ``reports/pytorch_junit.py``);
pytest's is its testcase's: ``failure`` / ``error`` fail, ``skipped`` of type ``pytest.xfail``
xfail, other ``skipped`` skip. Tests distcheck does not enumerate (ops without autograd, dtypes
without backward support) are ones pytest skips: they are counted, not compared.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from distcheck.records.case_record import FAIL, PASS, SKIPPED, XFAIL  # noqa: E402
from distcheck.reports.load import load_run  # noqa: E402
from distcheck.reports.pytorch_junit import by_test  # noqa: E402
from distcheck.suites.torch_opinfo.pytorch_names import BACKWARD_FILE, FORWARD_FILE, TESTS, pytorch_test  # noqa: E402

FILES = (BACKWARD_FILE, FORWARD_FILE)
DTYPES = ("float64", "complex128")
RAN = (PASS, FAIL, XFAIL)  # outcomes of a test that ran


def pytest_outcomes(path: str) -> dict[tuple[str, str], str]:
    """``{(class, test name): outcome}`` of a pytest JUnit XML (class without its module)."""
    outcomes = {}
    for case in ET.parse(path).iter("testcase"):
        classname = case.get("classname", "").rsplit(".", 1)[-1]
        tags = {child.tag: child for child in case}
        if "failure" in tags or "error" in tags:
            outcome = FAIL
        elif "skipped" in tags:
            outcome = XFAIL if tags["skipped"].get("type") == "pytest.xfail" else SKIPPED
        else:
            outcome = PASS
        outcomes[(classname, case.get("name", ""))] = outcome
    return outcomes


def distcheck_outcomes(records) -> dict[tuple[str, str], str]:
    """``{(class, test name): outcome}`` of a torch-opinfo run's records, per PyTorch test."""
    return {(r.test.classname, r.test.name): r.outcome for r in by_test(records)}


@dataclass
class Comparison:
    """Per PyTorch test in either run: both ran it (compared), outcomes that differ, tests
    pytest runs that distcheck does not (missing), tests distcheck has that pytest has not."""

    compared: int = 0
    differences: list[tuple[str, str, str]] = field(default_factory=list)  # (test, pytest, distcheck)
    missing: list[tuple[str, str]] = field(default_factory=list)  # (test, pytest's outcome)
    skipped_only_by_pytest: int = 0
    only_in_distcheck: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.differences or self.missing)


def compare(pytest_: dict, distcheck: dict, wanted=None) -> Comparison:
    """Compare outcomes keyed by (class, name); ``wanted(key)``: only those keys (a selection)."""
    result = Comparison()
    for key in sorted(set(pytest_) | set(distcheck)):
        if wanted is not None and not wanted(key):
            continue
        name = ".".join(key)
        ours, theirs = distcheck.get(key), pytest_.get(key)
        if theirs is None:
            result.only_in_distcheck.append(name)
        elif ours is None:
            if theirs in RAN:
                result.missing.append((name, theirs))
            else:
                result.skipped_only_by_pytest += 1
        else:
            result.compared += 1
            if ours != theirs:
                result.differences.append((name, theirs, ours))
    return result


def wanted_keys(checks: list[str], ops: list[str] | None) -> set | None:
    """The (class, name) of every selected test; None: every test of the check kinds."""
    if ops is None:
        return None
    return {(t.classname, t.name) for t in (pytorch_test(c, o, d) for c in checks for o in ops for d in DTYPES)}


def selected(checks: list[str], ops: list[str] | None):
    """Whether a (class, name) key is one of the selection's tests."""
    keys = wanted_keys(checks, ops)
    if keys is not None:
        return keys.__contains__
    prefixes = {(pytorch_test(c, "", "").classname, TESTS[c].method + "_") for c in checks}
    return lambda key: any(key[0] == cls and key[1].startswith(prefix) for cls, prefix in prefixes)


def keyword(checks: list[str], ops: list[str] | None) -> str | None:
    """pytest's ``-k`` for the selection (None: every test of both files)."""
    if ops is not None:
        return " or ".join(sorted(name for _, name in wanted_keys(checks, ops)))
    if set(checks) == set(TESTS):
        return None
    # no method name followed by "_" is a part of another test's name (test_fn_grad_ is not in
    # test_fn_gradgrad_..., test_forward_mode_AD_ not in test_inplace_forward_mode_AD_...)
    return " or ".join(f"{TESTS[check].method}_" for check in checks)


def timed_part(command: list[str], env: dict, cwd: str | None = None, interrupted: tuple[int, ...] = ()) -> float:
    """The seconds ``command`` ran; SystemExit if it was stopped by a signal (killed, or exited
    128 + the signal's number as ``distcheck run`` does) or exited with one of ``interrupted``."""
    print("$ " + shlex.join(command), file=sys.stderr, flush=True)
    start = time.perf_counter()
    # its own process group, stopped whole as bench_split.run stops its runs: pytest's xdist
    # workers and distcheck's children go with it, never left running beside the next part
    child = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        status = child.wait()
    except BaseException:  # the benchmark stopped (Ctrl-C, SIGTERM)
        os.killpg(child.pid, signal.SIGTERM)
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
        raise
    seconds = time.perf_counter() - start
    if status < 0 or status > 128 or status in interrupted:  # stopped: its time is no figure
        raise SystemExit(f"stopped: {shlex.join(command[:4])} ... was stopped (status {status})")
    # each part's figure is printed when it ends, so a long run stopped later keeps what it measured
    print(f"  {seconds:.1f} s; 1-min load average now {os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)
    return seconds


def run_pytest(folder: str, junit: str, args: argparse.Namespace, workers: int) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    if args.mode == "slow":
        env["PYTORCH_TEST_WITH_SLOW_GRADCHECK"] = "1"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junit-xml={junit}", *FILES]
    if workers > 1:
        command += ["-n", str(workers)]
    selected = keyword(args.checks, args.ops)
    if selected:
        command += ["-k", selected]
    return timed_part(command, env, cwd=folder, interrupted=(2,))  # pytest's status when interrupted


def run_distcheck(report: str, out: str, args: argparse.Namespace) -> float:
    command = [sys.executable, "-m", "distcheck", "run", "--mode", args.mode, "--checks", ",".join(args.checks)]
    command += ["--json", report, "--out", out, *(["--ops", ",".join(args.ops)] if args.ops else [])]
    return timed_part(command, {**os.environ, "PYTHONPATH": str(ROOT)})


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--pytorch-tests", metavar="DIR", help="folder with test_ops_gradients.py, test_ops_fwd_gradients.py"
    )
    p.add_argument("--pytest-junit", metavar="FILE", help="compare with this plain-pytest JUnit XML (pytest not run)")
    p.add_argument("--distcheck-json", metavar="FILE", help="compare this distcheck report (distcheck not run)")
    p.add_argument("--mode", choices=("fast", "slow"), default="fast")
    p.add_argument("--ops", type=_names, help="comma-separated op names (both sides)")
    p.add_argument("--checks", type=_names, default=list(TESTS), help="check kinds (default: all eight)")
    p.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of the pytest runs (default 1)")
    p.add_argument("--json", metavar="FILE", help="also write the figures and the comparison as JSON")
    p.add_argument("--keep", metavar="DIR", help="keep the runs' reports in DIR (default: a temporary folder)")
    return p


def stop_on_signal(signum, frame):
    raise SystemExit(f"stopped by {signal.Signals(signum).name}")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    unknown = [c for c in args.checks if c not in TESTS]
    if unknown or not (args.pytest_junit or args.pytorch_tests):
        parser().error(
            f"unknown check kinds {unknown}" if unknown else "give --pytorch-tests DIR or --pytest-junit FILE"
        )
    load = [os.getloadavg()[0]]
    times: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench_nightly-") as temporary:
        tmp = args.keep or temporary
        os.makedirs(tmp, exist_ok=True)
        if args.distcheck_json:
            records = load_run(args.distcheck_json).records
        else:
            report = os.path.join(tmp, "distcheck.json")
            times["distcheck run"] = run_distcheck(report, os.path.join(tmp, "run"), args)
            records = load_run(report).records
        load.append(os.getloadavg()[0])
        if args.pytest_junit:
            reference = args.pytest_junit
        else:
            folder = str(Path(args.pytorch_tests).resolve())
            reference = os.path.join(tmp, "plain.xml")
            times["pytest"] = run_pytest(folder, reference, args, 1)
            load.append(os.getloadavg()[0])
            times["pytest -n 2"] = run_pytest(folder, os.path.join(tmp, "xdist.xml"), args, 2)
            load.append(os.getloadavg()[0])
        comparison = compare(pytest_outcomes(reference), distcheck_outcomes(records), selected(args.checks, args.ops))
    print(report_text(times, comparison, load, args))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seconds": times, "load": load, "comparison": comparison.__dict__}, f, indent=1)
    return 0 if comparison.ok else 1


def report_text(times: dict[str, float], c: Comparison, load: list[float], args: argparse.Namespace) -> str:
    selection = f"mode {args.mode}, checks {','.join(args.checks)}, ops {','.join(args.ops) if args.ops else 'all'}"
    lines = [f"PyTorch gradient nightly ({selection}); 1-min load average {', '.join(f'{x:.2f}' for x in load)}"]
    ours = times.get("distcheck run")
    for name, seconds in times.items():
        ratio = f"  ({seconds / ours:.2f}x distcheck's time)" if ours and name != "distcheck run" else ""
        lines.append(f"  {name:<14} {seconds:9.1f} s{ratio}")
    lines.append(
        f"tests compared: {c.compared}; differences: {len(c.differences)}; missing (pytest runs, distcheck does "
        f"not): {len(c.missing)}; skipped by pytest, not enumerated by distcheck: {c.skipped_only_by_pytest}; "
        f"only in distcheck: {len(c.only_in_distcheck)}"
    )
    lines += [f"  DIFFERENT {name}: pytest {theirs}, distcheck {ours_}" for name, theirs, ours_ in c.differences]
    lines += [f"  MISSING {name}: pytest {theirs}" for name, theirs in c.missing]
    lines += [f"  ONLY IN DISTCHECK {name}" for name in c.only_in_distcheck[:20]]
    lines.append("OK" if c.ok else "DIFFERENT")
    return "\n".join(lines)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, stop_on_signal)  # so that the part running stops with the benchmark
    sys.exit(main())
