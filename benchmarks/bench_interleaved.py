"""torch's gradcheck and distcheck's case runner on the same cases, interleaved in one process:
the serial per-case ratio of a few ops, free of the machine's drift.

``bench_suite.py --distcheck serial`` runs torch's loop over every case, then distcheck's, minutes
apart; on a shared machine the speed drifts by more than the difference being measured. Here both
loops go over the selected cases (built from their ids, as a run builds them) ``--repeats`` times,
alternating, in this process, and the best time of each is compared.

    .venv/bin/python benchmarks/bench_interleaved.py --ops svd_lowrank,pca_lowrank
    .venv/bin/python benchmarks/bench_interleaved.py --ops add,mul,sin --checks grad --dtypes float64
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from distcheck import hash_seed  # noqa: E402


def loops(suite, infos, budget):
    """The two loops over ``infos``: torch's gradcheck (as ``bench_suite.py``'s reference
    loop judges a case) and distcheck's case runner (as a runner runs a case)."""
    from distcheck.case.judge import judge
    from distcheck.case.run import run_case, to_record
    from distcheck.suites.checkers import torch_checker

    checker = torch_checker()

    def torch_loop() -> float:
        begin = time.perf_counter()
        for info in infos:
            judge(suite.build(info.id), checker)
        return time.perf_counter() - begin

    def distcheck_loop() -> float:
        begin, texts = time.perf_counter(), []
        for info in infos:  # a record and its JSON text, as a runner makes them
            texts.append(to_record(info, run_case(suite, info.id, info.fingerprint, budget), 1).json_text)
        return time.perf_counter() - begin

    return torch_loop, distcheck_loop


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", required=True, help="comma-separated op names of torch-opinfo")
    p.add_argument("--checks", default="grad,gradgrad")
    p.add_argument("--dtypes", default="float64,complex128")
    p.add_argument("--mode", default="fast", choices=("fast", "slow"))
    p.add_argument("--repeats", type=int, default=5, help="runs of each loop, alternating (best counts)")
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error("--repeats: a positive integer")
    if not hash_seed.is_fixed():  # sample generation must match the listed fingerprints
        hash_seed.reexec([os.path.abspath(__file__), *(sys.argv[1:] if argv is None else argv)])

    import torch

    from distcheck.case.budget import Budget
    from distcheck.runner.run import select
    from distcheck.suites import Selection, UsageError, get_suite

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    suite = get_suite("torch-opinfo", args.mode)
    selection = Selection(
        checks=tuple(args.checks.split(",")), dtypes=tuple(args.dtypes.split(",")), ops=tuple(args.ops.split(","))
    )
    try:
        infos = [info for info in select(suite, selection) if info.status == "run"]
    except UsageError as e:
        p.error(str(e))
    if not infos:
        p.error("no runnable case in the selection")
    torch_loop, distcheck_loop = loops(suite, infos, Budget(2**33))
    torch_loop(), distcheck_loop()  # warm: imports, caches of both
    torch_best = distcheck_best = float("inf")
    for _ in range(args.repeats):
        torch_best = min(torch_best, torch_loop())
        distcheck_best = min(distcheck_best, distcheck_loop())
    n = len(infos)
    print(f"{n} cases, best of {args.repeats} alternating runs in one process:")
    print(f"  torch's gradcheck   {torch_best:8.3f} s  ({1000 * torch_best / n:.3f} ms a case)")
    print(f"  distcheck           {distcheck_best:8.3f} s  ({1000 * distcheck_best / n:.3f} ms a case)")
    print(f"  serial per-case ratio (target <= 1.0): {distcheck_best / torch_best:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
