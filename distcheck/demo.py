"""A small built-in demo suite: a few checks across the engines, with a summary.

Run with ``python -m distcheck.demo [--executor serial|ray]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

import numpy as np


def _torch_cases() -> list[tuple[str, Callable[[], bool]]]:
    import torch

    import distcheck

    g = torch.Generator().manual_seed(0)

    def t(*shape, dtype=torch.float64):
        return torch.randn(*shape, generator=g, dtype=dtype).requires_grad_()

    x, w, b = t(1, 2, 6, 6), t(3, 2, 3, 3), t(3)
    a, m = t(4, 5), t(5, 3)
    z = t(6, dtype=torch.complex128)

    class WrongScale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, v):
            ctx.save_for_backward(v)
            return v.sin()

        @staticmethod
        def backward(ctx, grad):
            (v,) = ctx.saved_tensors
            return grad * v.cos() * 1.01

    return [
        ("torch: conv2d", lambda ex: distcheck.gradcheck(torch.nn.functional.conv2d, (x, w, b), executor=ex)),
        ("torch: matmul", lambda ex: distcheck.gradcheck(torch.matmul, (a, m), executor=ex)),
        ("torch: sin(z) complex", lambda ex: distcheck.gradcheck(torch.sin, (z,), executor=ex)),
        ("torch: gradgrad tanh·x", lambda ex: distcheck.gradgradcheck(lambda v: v.tanh() * v, (a,), executor=ex)),
        (
            "torch: wrong backward (expected to fail)",
            lambda ex: not distcheck.gradcheck(WrongScale.apply, (a,), raise_exception=False, executor=ex),
        ),
    ]


def _numpy_cases() -> list[tuple[str, Callable[[], bool]]]:
    import distcheck

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((3, 2))
    matmul = distcheck.numpy_function(
        np.matmul, vjp=lambda x, y, g: (None if g is None else g @ y.T, None if g is None else x.T @ g)
    )
    return [("numpy: matmul with hand-written VJP", lambda ex: distcheck.gradcheck(matmul, (a, b), executor=ex))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executor", default="serial", help="serial (default) or ray")
    args = parser.parse_args(argv)
    cases = _numpy_cases()
    try:
        cases = _torch_cases() + cases
    except ImportError as e:
        print(f"(torch not installed: {e}; torch cases skipped)")
    passed = 0
    start = time.perf_counter()
    for name, run in cases:
        t0 = time.perf_counter()
        try:
            ok = bool(run(args.executor))
            verdict = "pass" if ok else "FAIL"
        except Exception as e:  # report, keep going
            ok, verdict = False, f"ERROR {type(e).__name__}: {str(e).splitlines()[0]}"
        passed += ok
        print(f"{verdict:>6}  {time.perf_counter() - t0:6.2f}s  {name}")
    print(f"\n{passed}/{len(cases)} demo checks as expected in {time.perf_counter() - start:.1f}s ({args.executor})")
    return 0 if passed == len(cases) else 1


if __name__ == "__main__":
    sys.exit(main())
