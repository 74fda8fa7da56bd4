"""The cost model's timing: a first call's one-off cost must not decide a check's plan."""

from __future__ import annotations

import subprocess
import sys
import time

from distcheck.plan.cost_model import best_time


def test_a_slow_first_call_is_timed_again():
    """torch's first ``autograd.grad`` in a process imports sympy (over a second): timed once,
    the first check on Ray was planned as hundreds of tiny tasks instead of a dozen."""
    calls = []

    def call():
        calls.append(None)
        time.sleep(1.2 if len(calls) == 1 else 0.001)

    assert best_time(call) < 0.1 and len(calls) == 3


def test_warm_up_takes_a_first_pullbacks_cost():
    """After the warm-up a worker (and the driver) runs, a check's first pullback imports nothing
    more (measured by the modules it adds, not by time)."""
    code = (
        "import sys, torch\n"
        "from distcheck.engines import get_engine\n"
        "from distcheck.executors.ray_executor import warm_libraries\n"
        "warm_libraries()\n"
        "before = set(sys.modules)\n"
        "x = torch.ones(3, dtype=torch.float64, requires_grad=True)\n"
        "out = x * x\n"
        "get_engine('torch').pullback(None, (x,), (out,), [0], [0])([torch.ones(3, dtype=torch.float64)])\n"
        "print(sorted(set(sys.modules) - before))\n"
    )
    added = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert added.strip() == "[]"


def test_a_first_timing_taken_before_counts_as_the_first_round():
    """Continuing from one timing times as the default rounds would have: a second timing
    always, a third only while the best is under 0.1 s."""
    for first, durations, rounds in ((0.5, [0.3, 0.001], 1), (0.05, [0.3, 0.001], 2), (0.5, [0.01, 0.3], 2)):
        calls = []

        def call(durations=durations, calls=calls):
            time.sleep(durations[len(calls)])
            calls.append(None)

        best = best_time(call, (0.1, 0.0), best=first)
        assert len(calls) == rounds and best <= first
