"""The torch side of ``benchmarks/gpu_check.sh``: torch's own gradcheck over the cases of a
``distcheck run --device cuda`` (same suite, same samples, same seeds), verdict by verdict;
and one large slow-mode check timed by torch and by distcheck on the GPU.

    python3 benchmarks/gpu_parity.py parity REPORT.json   # torch's verdicts vs the report's
    python3 benchmarks/gpu_parity.py large                # conv2d + tanh, ~4,000 inputs, slow mode

Runs from the repository's source without Ray (``PYTHONPATH=.``), with ``PYTHONHASHSEED=0``
(op_db's samples depend on it; ``gpu_check.sh`` sets it).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
import warnings


def parity(report_path: str, seconds: float | None = None) -> int:
    """Each runnable case of the report, judged again by torch's gradcheck loop on its device;
    with ``seconds``, it stops after that long and counts what it judged (the cases left are named
    as a count, never as the same)."""
    import torch

    from distcheck.case.judge import judge
    from distcheck.suites import CaseId, get_suite
    from distcheck.suites.checkers import torch_checker

    with open(report_path) as f:
        report = json.load(f)
    summary = report["summary"]
    suite = get_suite(summary["suite"], summary["mode"], summary.get("device", "cpu"))
    suite.prepare()
    checker = torch_checker()
    same = differ = 0
    start = time.perf_counter()
    cases = [(record, CaseId.parse(record["id"])) for record in report["cases"]]
    runnable = [(record, case) for record, case in cases if case.sample is not None]  # the rest: metadata
    for done, (record, case) in enumerate(runnable):
        if seconds is not None and time.perf_counter() - start > seconds:
            print(f"parity: stopped after {seconds:.0f} s, {len(runnable) - done} case(s) not judged by torch")
            break
        built = suite.build(case)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.set_num_threads(1)
            theirs, message = judge(built, checker)
        if theirs == record["verdict"]:
            same += 1
        else:
            differ += 1
            print(f"DIFFERENT {case}: distcheck {record['verdict']}, torch {theirs}: {message[:200]}")
    seconds = time.perf_counter() - start
    print(f"parity: {same} case(s) with torch's verdict, {differ} different ({seconds:.1f} s for torch's loop)")
    return 0 if differ == 0 and same > 0 else 1


def large(channels: int = 8, size: int = 20) -> int:
    """conv2d + tanh on a (1, C, S, S) input and a (C, C, 3, 3) weight (C=8, S=20: 3,200 + 576 =
    3,776 input elements, 3,200 outputs); slow mode (full Jacobians), by torch and by
    distcheck (serial executor; batched Jacobian blocks where measured faster, and then element
    by element, ``vectorize=False``), on the GPU."""
    import torch

    import distcheck

    device = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: only to try the script without a GPU
    g = torch.Generator().manual_seed(0)
    x = torch.rand(1, channels, size, size, dtype=torch.float64, generator=g).to(device).requires_grad_()
    w = torch.rand(channels, channels, 3, 3, dtype=torch.float64, generator=g).to(device).requires_grad_()

    def func(x, w):
        return torch.tanh(torch.nn.functional.conv2d(x, w, padding=1))

    inputs = (x, w)
    elements = sum(t.numel() for t in inputs)
    print(f"large: conv2d + tanh, {elements:,} input elements, {func(x, w).numel():,} outputs, slow mode, {device}")
    counts = distcheck.BatchCounts()
    ours = functools.partial(distcheck.gradcheck, executor="serial", batch_counts=counts)
    exact = functools.partial(distcheck.gradcheck, executor="serial", vectorize=False)
    small = (torch.rand(3, dtype=torch.float64, device=device).requires_grad_(),)
    torch.autograd.gradcheck(torch.sin, small)  # first calls import and initialize: not timed
    ours(torch.sin, small)
    counts.fallbacks.clear()
    # last, the element-by-element path (as before batched blocks): the step's time limit may cut it
    for name, check in (("torch", torch.autograd.gradcheck), ("distcheck", ours), ("exact", exact)):
        _synchronize(torch, device)
        start = time.perf_counter()
        try:
            verdict = check(func, inputs, fast_mode=False)
        except Exception as e:  # a wrong verdict is a finding, not a crash of the script
            verdict = f"{type(e).__name__}: {str(e)[:120]}"
        _synchronize(torch, device)
        print(f"large: {name:<9} {time.perf_counter() - start:8.2f} s  verdict {verdict}")
        if check is ours:
            print(f"large: distcheck decided {counts.batched} comparison(s) batched, fallbacks {counts.fallbacks}")
    return 0


def _synchronize(torch, device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("parity")
    check.add_argument("report")
    check.add_argument("--seconds", type=float, help="stop after this long, counting what was judged")
    big = commands.add_parser("large")
    big.add_argument("--channels", type=int, default=8)
    big.add_argument("--size", type=int, default=20)
    args = parser.parse_args(argv)
    if args.command == "parity":
        return parity(args.report, args.seconds)
    return large(args.channels, args.size)


if __name__ == "__main__":
    sys.exit(main())
