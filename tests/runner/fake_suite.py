"""A tiny suite for runner tests: each case's behaviour is its op name.

- ``sin``: a correct check (passes); ``big``: the same on 3,000 elements; ``wrong``: a wrong
  backward (fails); ``crash``: the function raises (error); ``sleep``: sleeps ``SLEEP``
  seconds in Python; ``block``: the odd sample (``odd``, 0 unless told) blocks in a C call
  (libc ``sleep``) that only killing the process interrupts, the other samples pass; ``die``:
  the odd sample ends the process that runs it (as a crash in C would); ``drag``: every evaluation takes
  0.2 s (a case worth splitting, too slow to finish; with ``marks``, a folder, each evaluation
  leaves a file there); ``mismatch``: the
  rebuilt inputs differ from the enumerated ones (another fingerprint); ``hashseed``: the
  rebuilt inputs match only in a process with PYTHONHASHSEED=0 (as samples that iterate over
  sets of strings); ``nobuild``:
  rebuilding fails; ``nolist``: listing the group fails; ``dielist``: listing the group ends the
  process; ``skipped`` / ``xfail``: not run. Every sample of ``nap…`` ops (``nap``,
  ``nap3``, ...) sleeps ``$FAKE_NAP`` seconds (default 1) and passes; ``flaky`` fails until
  file ``marker`` exists (it creates it), then passes; ``flakypid`` passes only in a process
  other than the one that ran it first (the pid goes into ``marker``); ``stall``: the odd
  sample blocks as ``block``'s does, the even samples before it nap 1 s (once per check), the others pass at once.
  ``big`` with ``marks`` (a folder): a task process (not an actor, such as a split case's
  coordinator) that evaluates it at perturbed inputs (a finite difference) leaves a file there
  named by its pid (and every evaluation of it takes 2 ms). ``dietwice``: the odd sample ends
  the process that runs it the first two times (it counts them in ``marker``), then passes. ``bigdie``: ``big``, but the
  evaluation with its middle element perturbed (a finite difference: never the evaluations
  that estimate and plan the case) ends the process that runs it — the first time only if
  ``marker`` is given (it creates ``marker-died``), else always. ``expected``: a test expected to
  fail (``expected_to_fail``), whose odd sample has a wrong backward (``xfail``), the others
  passing (``xpass``).
"""

from __future__ import annotations

import ctypes
import functools
import os
import time
from collections.abc import Iterator

import torch

from distcheck.suites.base import RUN, BuiltCase, CaseId, CaseInfo, CheckCall, GroupInfo, Selection, enumerate_cases

SLEEP = 30.0
OPS = ("sin", "big", "drag", "wrong", "crash", "sleep", "block", "die", "mismatch", "nobuild", "skipped", "xfail")


class _WrongSin(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.cos() * 1.5


def _crash(x):
    raise ValueError("this op is broken")


def _sleep(x):
    time.sleep(SLEEP)
    return x.sin()


def _die(x):
    os._exit(3)


def _die_twice(x, marker: str):
    deaths = len(os.listdir(marker)) if os.path.isdir(marker) else 0
    if deaths < 2:
        os.makedirs(marker, exist_ok=True)
        with open(os.path.join(marker, str(deaths)), "w"):
            pass
        os._exit(3)
    return x.sin()


def _drag(x, marks: str | None = None):
    if marks is not None:  # leave a trace of every evaluation
        with open(os.path.join(marks, f"{os.getpid()}-{time.monotonic_ns()}"), "w"):
            pass
    time.sleep(0.2)
    return x.sin()


def _block(x):
    ctypes.CDLL(None).sleep(int(SLEEP))
    return x.sin()


_MIDDLE = 1500


def _die_in_a_column(x, marker: str | None):
    if float(x[_MIDDLE]) != _BIG[_MIDDLE]:
        if marker is None:
            os._exit(3)
        died = f"{marker}-died"
        if not os.path.exists(died):
            with open(died, "w"):
                pass
            os._exit(3)
    return x.sin()


def _mark_columns(x, marks: str):
    """sin, marking the processes (not actors) that evaluate it at a perturbed input: those
    that run finite-difference chunks. Every evaluation takes 2 ms, so that the estimate and
    the chunks' plan see the columns' cost (timed at the unperturbed input, a cheap sin would
    put all of them in one chunk) and a runner that starts late still gets chunks."""
    if not torch.equal(x.detach(), _BIG_TENSOR):
        import ray

        if ray.is_initialized() and ray.get_runtime_context().get_actor_id() is None:
            with open(os.path.join(marks, str(os.getpid())), "w"):
                pass
    time.sleep(0.002)
    return x.sin()


def _nap(x):
    time.sleep(float(os.environ.get("FAKE_NAP", "1")))
    return x.sin()


def _flaky(marker: str, fresh: bool):
    """Wrong the first time; then right (``fresh``: only in another process)."""
    if not os.path.exists(marker):
        with open(marker, "w") as f:
            f.write(str(os.getpid()))
        return _WrongSin.apply
    with open(marker) as f:
        first = int(f.read())
    return _WrongSin.apply if fresh and first == os.getpid() else torch.sin


_BIG_TENSOR = torch.linspace(0.1, 0.9, 3000, dtype=torch.float64)
_BIG = [float(v) for v in _BIG_TENSOR]

FUNCTIONS = {
    "sin": torch.sin,
    "wrong": _WrongSin.apply,
    "crash": _crash,
    "sleep": _sleep,
    "block": _block,
    "drag": _drag,
    "die": _die,
}


class FakeSuite:
    name = "fake"
    engine = "torch"

    def __init__(
        self,
        mode: str = "fast",
        ops: tuple[str, ...] = OPS,
        samples: int = 1,
        odd: int = 0,
        marker: str | None = None,
        marks: str | None = None,
    ):
        self.mode, self.ops, self.samples, self.odd = mode, ops, samples, odd
        self.marker, self.marks = marker, marks

    def prepare(self) -> None:
        pass

    def expected_to_fail(self, case: CaseId) -> bool:
        return case.op == "expected"

    def cases(self, selection: Selection) -> Iterator[CaseInfo]:
        return enumerate_cases(self, selection)

    def groups(self, selection: Selection) -> Iterator[GroupInfo | CaseInfo]:
        for op in selection.ops or self.ops:
            if op in ("skipped", "xfail"):
                for check in selection.checks:
                    yield CaseInfo(CaseId(self.name, op, "float64", check), op, f"{op} on purpose")
            else:
                yield GroupInfo(self.name, op, "float64", selection.checks)

    def list_group(self, group: GroupInfo, selection: Selection) -> list[CaseInfo]:
        if group.op == "nolist":
            raise RuntimeError("no samples today")
        if group.op == "dielist":
            os._exit(3)
        fingerprint = "fp-hashseed0" if group.op == "hashseed" else f"fp-{group.op}"
        cases = (
            CaseId(self.name, group.op, "float64", check, k) for check in group.checks for k in range(self.samples)
        )
        return [CaseInfo(case, RUN, "", fingerprint) for case in cases if selection.wants(case)]

    def build(self, case: CaseId) -> BuiltCase:
        if case.op == "nobuild":
            raise KeyError("no such sample")
        size = {"big": 3000, "bigdie": 3000, "drag": 50}.get(case.op, 4)
        x = torch.linspace(0.1, 0.9, size, dtype=torch.float64).requires_grad_()
        func = FUNCTIONS.get(case.op, torch.sin) if case.sample == self.odd else torch.sin
        if case.op == "expected" and case.sample == self.odd:
            func = _WrongSin.apply
        if case.op == "drag" and self.marks is not None:
            func = functools.partial(_drag, marks=self.marks)
        if case.op == "big" and self.marks is not None:
            func = functools.partial(_mark_columns, marks=self.marks)
        if case.op == "dietwice" and case.sample == self.odd:
            func = functools.partial(_die_twice, marker=f"{self.marker}-{case}")
        if case.op == "bigdie":
            func = functools.partial(_die_in_a_column, marker=self.marker)
        if case.op.startswith("nap"):
            func = _nap
        elif case.op == "stall":
            func = FUNCTIONS["block"] if case.sample == self.odd else torch.sin
        elif case.op in ("flaky", "flakypid"):
            func = _flaky(f"{self.marker}-{case}", fresh=case.op == "flakypid")
        calls = (
            CheckCall("gradcheck" if case.check == "grad" else "gradgradcheck", {"fast_mode": self.mode == "fast"}),
        )
        rebuilt = {"mismatch": "fp-other", "hashseed": f"fp-hashseed{os.environ.get('PYTHONHASHSEED')}"}
        rebuilt = rebuilt.get(case.op, f"fp-{case.op}")
        napping = case.op == "stall" and case.sample < self.odd and case.sample % 2 == 0
        before = functools.partial(time.sleep, 1.0) if napping else lambda: None
        expected = "known bug" if case.op == "expected" else None
        return BuiltCase(case, func, (x,), calls, rebuilt, before_call=before, expected_failure=expected)


class UngroupedFakeSuite(FakeSuite):
    """The fake suite without groups: enumerated case by case on the driver."""

    name = "fake"
    groups = None
    list_group = None

    def cases(self, selection: Selection) -> Iterator[CaseInfo]:
        for item in FakeSuite.groups(self, selection):
            yield from FakeSuite.list_group(self, item, selection) if isinstance(item, GroupInfo) else [item]


class TracedSuite(FakeSuite):
    """The fake suite under the name ``name``, leaving a trace of its processes in folder
    ``trace``: each process that prepares it writes ``prepared-<pid>`` (``actor`` or ``task``,
    and when its preparing began and ended: ``time.time()``), napping ``nap`` seconds while it
    prepares — the first process to prepare it ``first_nap`` instead; each listing writes
    ``listed-<pid>-<time>``."""

    def __init__(self, name: str, trace: str, nap: float = 0.0, first_nap: float | None = None, **options):
        super().__init__(**options)
        self.name, self.trace, self.nap, self.first_nap = name, trace, nap, first_nap

    def prepare(self) -> None:
        import ray

        begin = time.time()
        try:
            os.close(os.open(os.path.join(self.trace, "first"), os.O_CREAT | os.O_EXCL))
            nap = self.nap if self.first_nap is None else self.first_nap
        except FileExistsError:
            nap = self.nap
        time.sleep(nap)
        role = "actor" if ray.get_runtime_context().get_actor_id() is not None else "task"
        with open(os.path.join(self.trace, f"prepared-{os.getpid()}"), "w") as f:
            f.write(f"{role} {begin} {time.time()}")

    def list_group(self, group: GroupInfo, selection: Selection) -> list[CaseInfo]:
        with open(os.path.join(self.trace, f"listed-{os.getpid()}-{time.time()}"), "w"):
            pass
        return super().list_group(group, selection)

    def traced(self) -> tuple[list[tuple[str, float, float]], list[float]]:
        """``(role, began, ended)`` of each process that prepared the suite; the listings' times."""
        prepared, listed = [], []
        for name in os.listdir(self.trace):
            if name.startswith("prepared-"):
                with open(os.path.join(self.trace, name)) as f:
                    role, began, ended = f.read().split()
                prepared.append((role, float(began), float(ended)))
            elif name.startswith("listed-"):
                listed.append(float(name.rsplit("-", 1)[1]))
        return prepared, sorted(listed)
