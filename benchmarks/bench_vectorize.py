"""Per core, slow mode: distcheck's checks with batched Jacobian blocks against torch's serial
gradcheck loop, on the same torch-opinfo cases, in one process pinned to one core, one thread.

Case by case (built from its id as a run builds it, in the suite's order), three judgements
alternate, each on the case rebuilt: torch.autograd's gradcheck / gradgradcheck, distcheck's
with ``vectorize=True`` and distcheck's with ``vectorize=False`` (the element-by-element path,
as before batching); their order rotates from case to case. A case whose Jacobians exceed the
memory budget is skipped by all three, from the same estimate; a test expected to fail stops
at its first failing sample on each side (as PyTorch's test and ``distcheck run`` do). Prints, with the load average
before and after: per op the seconds of each side, torch / batched, the comparisons decided
batched and the fallbacks by reason; every case whose verdicts differ; the totals over all ops
and over the ops where batching applies (at least half of their comparisons decided batched),
named. ``--profile DIR``: where each side's time goes, from a py-spy sampling profile of a child
process running that side's loop alone (numerical columns, analytical rows, auxiliary checks,
deciding what to batch, the suite path, the rest).

    .venv/bin/python benchmarks/bench_vectorize.py                                # the default ops
    .venv/bin/python benchmarks/bench_vectorize.py --ops cumsum,kron --checks grad
    .venv/bin/python benchmarks/bench_vectorize.py --every 4 --profile /tmp/profiles
    .venv/bin/python benchmarks/bench_vectorize.py --all --every 8                # a sample of every op
    .venv/bin/python benchmarks/bench_vectorize.py --all --no-exact               # the whole suite, torch and batched

Targets (issue #48): the slow grad + gradgrad suite at least 2.5x torch's loop, at least 4x on the
ops where batching applies, verdicts identical.
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import shutil
import subprocess
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from distcheck import hash_seed  # noqa: E402

OPS = (  # the examples: ops where batching pays, where it does not (kron, sort), where it cannot (ctc_loss)
    "cumsum,fft.fft2,cdist,kron,sort,nn.functional.max_pool2d,max_pool2d_with_indices_backward,"
    "nn.functional.dropout3d,nn.functional.scaled_dot_product_attention,_upsample_bilinear2d_aa,"
    "nn.functional.interpolate.bilinear,nn.functional.conv2d,linalg.det,matmul,"
    "nn.functional.fractional_max_pool3d,nn.functional.ctc_loss"
)
SIDES = ("torch", "batched", "exact")
CATEGORIES = (
    "numerical columns",
    "analytical rows",
    "auxiliary checks",
    "deciding batches",
    "the checks' rest",
    "suite path",
    "rest",
)
# Frames of each category (function name, file ending), torch's and distcheck's; a sample counts
# for the outermost category frame of its stack; else for the checks' rest (planning, comparing,
# messages) if it is inside a check, the rest if it imports (start-up), the suite path (listing,
# building, judging cases) if it is inside the suite's code, the rest otherwise.
FRAMES = {
    "numerical columns": (
        ("_get_numerical_jacobian", "gradcheck.py"),
        ("_get_numerical_jvp_fn", "gradcheck.py"),
        ("run", "units/numerical.py"),
    ),
    "analytical rows": (
        ("_check_analytical_jacobian_attributes", "gradcheck.py"),
        ("_get_analytical_jacobian_forward_ad", "gradcheck.py"),
        ("_get_analytical_vJu_backward_mode", "gradcheck.py"),
        ("run", "units/analytical.py"),
    ),
    "auxiliary checks": (
        ("_test_batched_grad", "gradcheck.py"),
        ("_test_batched_grad_forward_ad", "gradcheck.py"),
        ("_test_backward_mul_by_grad_output", "gradcheck.py"),
        ("_test_undefined_backward_mode", "gradcheck.py"),
        ("_test_undefined_forward_mode", "gradcheck.py"),
        ("run", "units/auxiliary.py"),
    ),
    "deciding batches": (("decide", "plan/batch_choice.py"),),
}
CHECK_FILES = ("torch/autograd/gradcheck.py", "distcheck/api.py")
SUITE_FILES = ("distcheck/suites/", "distcheck/runner/", "torch/testing/_internal/")


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def checkers(counts):
    """torch's checker, and distcheck's on this process with and without batching (the batched
    one adds each check's counts to ``counts``), as a run's cases are judged."""
    from distcheck.case.judge import distcheck_checker
    from distcheck.executors.serial import SerialExecutor
    from distcheck.suites.checkers import torch_checker

    serial = SerialExecutor()
    return {
        "torch": torch_checker(),
        "batched": distcheck_checker(serial, True, counts),
        "exact": distcheck_checker(serial, False),
    }


def timed(suite, info, checker, budget) -> tuple[str, float, bool]:
    """The case's verdict under ``checker``, the seconds its checks took (not its build), and
    whether the case is expected to fail (judged by distcheck, a case that passes is then
    checked again by torch's gradcheck: the suite's path, not the checks')."""
    from distcheck.case.budget import SKIP, estimate, has_slow_calls
    from distcheck.case.judge import judge

    built = suite.build(info.id)
    if has_slow_calls(built):
        try:
            if budget.decide(estimate(built))[0] == SKIP:
                return "skipped", 0.0, False
        except Exception:  # the function fails: the checks say how
            pass
    start = time.perf_counter()
    verdict, _ = judge(built, checker)
    return verdict, time.perf_counter() - start, built.expected_failure is not None


def cases(args):
    from distcheck.runner.run import select
    from distcheck.suites import Selection, get_suite

    suite = get_suite("torch-opinfo", "slow")
    ops = None if args.all else tuple(args.ops.split(","))
    selection = Selection(checks=tuple(args.checks.split(",")), dtypes=tuple(args.dtypes.split(",")), ops=ops)
    infos = [info for info in select(suite, selection) if info.status == "run"]
    return suite, infos[:: args.every]


def run_sides(args, sides: tuple[str, ...]) -> dict:
    """Every case judged by each of ``sides`` in turn; per op, per side: seconds and verdicts."""
    import torch

    from distcheck import BatchCounts
    from distcheck.case.budget import Budget, default_max_jacobian_mb
    from distcheck.case.first_failure import Stops

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    suite, infos = cases(args)
    counts = BatchCounts()
    chosen = checkers(counts)
    budget = Budget(default_max_jacobian_mb() * 2**20)
    per_op: dict = collections.defaultdict(
        lambda: {"seconds": collections.Counter(), "xfail": collections.Counter(), "counts": BatchCounts()}
    )
    differing = []
    stops = {side: Stops() for side in sides}  # a test expected to fail stops at its first failing sample
    for n, info in enumerate(infos):
        if len(sides) > 1 and per_op and info.id.op not in per_op:  # an op done: its line now
            print("  done: " + _line(*list(per_op.items())[-1]), file=sys.stderr, flush=True)
        op = per_op[info.id.op]
        verdicts = {}
        for side in sides[n % len(sides) :] + sides[: n % len(sides)]:
            if stops[side].skipped(info.id) is not None:
                verdicts[side] = "skipped"
                continue
            verdicts[side], seconds, expected_failure = timed(suite, info, chosen[side], budget)
            stops[side].note(info.id, verdicts[side])
            op["seconds"][side] += seconds
            op["xfail"][side] += seconds if expected_failure else 0.0
        op["counts"] += counts
        counts.batched, counts.fallbacks = 0, collections.Counter()  # the next case's
        if len(set(verdicts.values())) > 1:
            differing.append((info.id, verdicts))
    return {"per_op": dict(per_op), "differing": differing, "cases": len(infos)}


def report(result: dict) -> None:
    per_op = result["per_op"]
    width = max([len(op) for op in per_op] + [2])
    print(f"{'op':{width}}  {'torch':>9} {'batched':>9} {'exact':>9}  torch/batched  decided batched, fallbacks")
    applies = []
    for op, found in sorted(per_op.items(), key=lambda item: -item[1]["seconds"]["torch"]):
        print(_line(op, found, width))
        c = found["counts"]
        if c.batched and c.batched >= c.exact:
            applies.append(op)
    total = sum((found["seconds"] for found in per_op.values()), collections.Counter())
    xfail = sum((found["xfail"] for found in per_op.values()), collections.Counter())
    where = sum((per_op[op]["seconds"] for op in applies), collections.Counter())
    print(f"\n{result['cases']} cases; verdicts differ on {len(result['differing'])}")
    for case_id, verdicts in result["differing"]:
        print(f"  {case_id}: {verdicts}")
    print(f"all ops: torch {total['torch']:.1f} s, batched {total['batched']:.1f} s, exact {total['exact']:.1f} s")
    exact = _ratio(total, "exact")
    print(f"  per core, torch / batched: {_ratio(total):.2f}x (target >= 2.5); torch / exact: {exact:.2f}x")
    print(
        f"  of which cases expected to fail: torch {xfail['torch']:.1f} s, batched {xfail['batched']:.1f} s, "
        f"exact {xfail['exact']:.1f} s (distcheck's judge checks a passing one again with torch's gradcheck);"
        f" without them {_ratio(total - xfail):.2f}x"
    )
    print(f"ops where batching applies ({len(applies)}): {', '.join(applies) or '-'}")
    print(f"  per core, torch / batched: {_ratio(where):.2f}x (target >= 4)")


def _line(op: str, found: dict, width: int = 0) -> str:
    """An op's seconds per side, torch / batched, and what its comparisons were decided on."""
    s, c = found["seconds"], found["counts"]
    fallbacks = ", ".join(f"{reason} {k}" for reason, k in c.fallbacks.most_common())
    return (
        f"{op:{width}}  {s['torch']:9.2f} {s['batched']:9.2f} {s['exact']:9.2f}  {_ratio(s):13.2f}"
        f"  {c.batched} of {c.batched + c.exact}; {fallbacks or '-'}"
    )


def _ratio(seconds, side: str = "batched") -> float:
    return seconds["torch"] / seconds[side] if seconds[side] else float("nan")


def profile(args, folder: str) -> None:
    """Each side's loop alone in a child process under py-spy; the shares of its samples."""
    os.makedirs(folder, exist_ok=True)
    argv = [a for a in sys.argv[1:] if a != "--profile" and a != folder]
    for side in SIDES:
        out = os.path.join(folder, f"{side}.txt")
        command = [_py_spy(), "record", "-r", "100", "--format", "raw", "-o", out, "--"]
        command += [sys.executable, os.path.abspath(__file__), *argv, "--side", side]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shares = shares_of(out)
        total = sum(shares.values())
        parts = ", ".join(f"{c} {100 * shares[c] / total:.0f} %" for c in CATEGORIES)
        print(f"{side}: {total / 100:.1f} s sampled: {parts}")


def _py_spy() -> str:
    """py-spy beside this Python (the venv's), else on the PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return beside if os.path.exists(beside) else shutil.which("py-spy") or "py-spy"


def shares_of(path: str) -> collections.Counter:
    """Samples per category of a py-spy raw profile (``frame;frame;... count`` lines, root first)."""
    shares: collections.Counter = collections.Counter()
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip().rpartition(" ")
            shares[_category(stack.split(";"))] += int(count)
    return shares


@functools.cache
def _frame_category(frame: str) -> str | None:
    name, _, where = frame.partition(" (")
    for category, frames in FRAMES.items():
        if any(name.endswith(function) and where.split(":")[0].endswith(file) for function, file in frames):
            return category
    return None


def _category(frames: list[str]) -> str:
    for frame in frames:
        category = _frame_category(frame)
        if category is not None:
            return category
    if any(part in frame for frame in frames for part in CHECK_FILES):
        return "the checks' rest"
    if any(frame.startswith("_find_and_load ") for frame in frames):
        return "rest"
    return "suite path" if any(part in frame for frame in frames for part in SUITE_FILES) else "rest"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", default=OPS, help="comma-separated op names of torch-opinfo")
    p.add_argument("--all", action="store_true", help="every op of the suite (instead of --ops)")
    p.add_argument("--checks", default="grad,gradgrad")
    p.add_argument("--dtypes", default="float64,complex128")
    p.add_argument("--every", type=int, default=1, help="every n-th case of the selection")
    p.add_argument("--core", type=int, help="the core to pin this process to (default: the last it may use)")
    p.add_argument("--profile", metavar="DIR", help="profile each side's loop with py-spy, raw profiles in DIR")
    p.add_argument("--no-exact", action="store_true", help="leave out the element-by-element side (its column shows 0)")
    p.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)  # a profiled child: one side's loop
    args = p.parse_args(argv)
    if args.every < 1:
        p.error("--every: a positive integer")
    if not hash_seed.is_fixed():  # sample generation must match the listed fingerprints
        hash_seed.reexec([os.path.abspath(__file__), *(sys.argv[1:] if argv is None else argv)])
    core = max(os.sched_getaffinity(0)) if args.core is None else args.core
    os.sched_setaffinity(0, {core})
    if args.side:
        run_sides(args, (args.side,))
        return 0
    from distcheck.suites import UsageError

    print(f"pinned to core {core}, one thread; {load()}")
    began = time.perf_counter()
    try:
        result = run_sides(args, SIDES[:2] if args.no_exact else SIDES)
    except UsageError as e:
        p.error(str(e))
    report(result)
    print(f"{time.perf_counter() - began:.0f} s; {load()}")
    if args.profile:
        profile(args, args.profile)
        print(load())
    return 0


if __name__ == "__main__":
    sys.exit(main())
