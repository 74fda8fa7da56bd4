"""Declare a suite in a few lines: a list of ops, each a torch function with a sample generator.

    import torch
    from distcheck.suites.declare import Op, declare_suite

    def matrices(dtype):                      # seeded by distcheck: draw from torch's global RNG
        yield torch.randn(3, 4, dtype=dtype, requires_grad=True)
        yield torch.randn(5, 5, dtype=dtype, requires_grad=True), 2.0   # inputs after the first: args

    suite = declare_suite("my-kernels", [
        Op("scaled_tanh", ScaledTanh.apply, matrices),
        Op("clamp", MyClamp.apply, matrices, dtypes=("float64", "complex128"), checks=("grad",),
           options={"atol": 1e-4}, xfail={"complex128": "no complex backward yet"}),
    ])

Each sample is the inputs of one ``gradcheck(function, inputs)`` (a tuple, or one tensor).
A case is op × dtype × sample × check kind, with ids like every suite's
(``my-kernels::clamp::float64::sample1::grad``); everything else comes from the runner:

- **Seeding.** Before an op's samples are generated, torch's, numpy's and ``random``'s global
  RNGs are seeded with a fixed seed, so every process generates the same samples; before
  each check they are seeded from the case id (its random grad-outputs and batched vectors).
- **Fingerprints** of the generated inputs (the torch-opinfo suite's: structure, dtypes,
  shapes, strides, bytes), checked again wherever a case is rebuilt.
- **Check calls.** Check kinds ``grad``, ``gradgrad``, ``fwgrad``, ``fwgrad_bwgrad`` make the
  calls of PyTorch's OpInfo gradient tests, with the options the torch-opinfo suite uses
  (``check_grad_dtypes=True``, batched checks on, fast mode in ``--mode fast``; the OpInfo
  flags ``gradcheck_nondet_tol``, ``gradcheck_fast_mode``, ``check_batched_grad``... are
  fields of :class:`Op`); ``options`` overrides keywords of every call.
- **Skips and expected failures** (``skip`` / ``xfail``: reason by key) are reported with their
  reason and not run. A key is a check kind (``"gradgrad"``), a dtype (``"complex128"``),
  both (``"gradgrad:complex128"``) or ``"*"`` (the whole op); the most specific key wins, and a
  skip wins over an expected failure.

Register it for ``distcheck run --suite my-kernels`` in your package's ``pyproject.toml``::

    [project.entry-points."distcheck.suites"]
    my-kernels = "my_package.gradchecks:suite"

or run it from any importable module: ``distcheck run --suite my_package.gradchecks:suite``.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import inspect
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from distcheck.check import as_tuple
from distcheck.suites.base import (
    CHECK_KINDS,
    ERROR,
    GRADCHECK_KINDS,
    MODES,
    RUN,
    SEPARATOR,
    SKIPPED,
    XFAIL,
    BuiltCase,
    CaseId,
    CaseInfo,
    CheckCall,
    GroupInfo,
    Selection,
    UsageError,
    enumerate_cases,
)
from distcheck.suites.suggest import hint
from distcheck.suites.torch_opinfo.calls import check_calls
from distcheck.suites.torch_opinfo.fingerprint import values_fingerprint
from distcheck.suites.torch_opinfo.samples import SAMPLE_SEED, seed_everything
from distcheck.suites.torch_opinfo.suite import case_seed

__all__ = ["DeclaredSuite", "Op", "declare_suite"]

_KEPT = 4  # sample lists a process keeps (per suite object)
_CALL_OPTIONS = frozenset(inspect.signature(torch.autograd.gradcheck).parameters) | frozenset(
    inspect.signature(torch.autograd.gradgradcheck).parameters
)


@dataclass(frozen=True)
class Op:
    """One op of a declared suite.

    ``function(*inputs)`` is checked on each sample ``samples(dtype)`` yields (``dtype`` a
    ``torch.dtype``; draw random numbers from the global RNGs, which distcheck seeds), in each
    of ``dtypes``, with each of ``checks``. ``options``: gradcheck keywords for every call,
    over the defaults. ``skip`` / ``xfail``: reasons by check kind, dtype, ``check:dtype`` or
    ``*``. The remaining fields are the OpInfo flags of the same names (None: the test-suite
    default).
    """

    name: str
    function: Callable[..., Any]
    samples: Callable[[torch.dtype], Iterable[Any]]
    dtypes: tuple[str, ...] = ("float64",)
    checks: tuple[str, ...] = ("grad", "gradgrad")
    options: Mapping[str, Any] = field(default_factory=dict)
    skip: Mapping[str, str] = field(default_factory=dict)
    xfail: Mapping[str, str] = field(default_factory=dict)
    gradcheck_nondet_tol: float = 0.0
    gradcheck_fast_mode: bool | None = None
    check_batched_grad: bool | None = None
    check_batched_gradgrad: bool | None = None
    check_batched_forward_grad: bool | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtypes", tuple(self.dtypes))
        object.__setattr__(self, "checks", tuple(self.checks))
        _validate(self)

    def status(self, check: str, dtype: str) -> tuple[str, str]:
        """``(status, reason)`` of this op's ``check`` in ``dtype``: run, skipped or xfail."""
        for status, marks in ((SKIPPED, self.skip), (XFAIL, self.xfail)):
            for key in (f"{check}:{dtype}", check, dtype, "*"):
                if key in marks:
                    return status, marks[key]
        return RUN, ""


def _validate(op: Op) -> None:
    def bad(what: str) -> ValueError:
        return ValueError(f"op {op.name!r}: {what}")

    if not op.name or SEPARATOR in op.name:
        raise bad("an op name must be non-empty and without '::'")
    if not callable(op.function) or not callable(op.samples):
        raise bad("function and samples must be callables")
    for check in op.checks:
        if check not in GRADCHECK_KINDS:  # an in-place variant or fail_gradgrad is an OpInfo's notion
            raise bad(f"unknown check kind {check!r} (choose from {', '.join(GRADCHECK_KINDS)})")
    for dtype in op.dtypes:
        torch_dtype(dtype)
    unknown = sorted(set(op.options) - _CALL_OPTIONS)
    if unknown:
        raise bad(f"options {', '.join(unknown)} are not gradcheck / gradgradcheck keywords")
    keys = {"*", *GRADCHECK_KINDS, *op.dtypes, *(f"{c}:{d}" for c in GRADCHECK_KINDS for d in op.dtypes)}
    for key in [*op.skip, *op.xfail]:
        if key not in keys:
            raise bad(f"skip / xfail key {key!r}: expected a check kind, one of its dtypes, 'check:dtype' or '*'")


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype called ``name`` (``float64``, ``complex128``, ...)."""
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown torch dtype {name!r}")
    return dtype


class _Samples:
    """The last few sample lists generated in this process, with each sample's fingerprint as
    generated. A sample a check changed in place is regenerated before it is handed out again.
    Never pickled with its suite: a process generates its own."""

    def __init__(self) -> None:
        self.lists: collections.OrderedDict[tuple[str, str], tuple[list[tuple], list[str]]] = collections.OrderedDict()
        self.lock = threading.RLock()  # the global RNGs are per process: one generation at a time

    def generated(self, op: Op, dtype: str, fresh: bool = False) -> tuple[list[tuple], list[str]]:
        key = (op.name, dtype)
        with self.lock:
            if fresh or key not in self.lists:
                seed_everything(SAMPLE_SEED)
                listed = [as_tuple(s) for s in op.samples(torch_dtype(dtype))]  # as gradcheck takes inputs
                self.lists[key] = (listed, [values_fingerprint(s) for s in listed])
                while len(self.lists) > _KEPT:
                    self.lists.popitem(last=False)
            self.lists.move_to_end(key)
            return self.lists[key]

    def sample(self, op: Op, dtype: str, index: int) -> tuple[tuple, str]:
        listed, prints = self.generated(op, dtype)
        if not 0 <= index < len(listed):
            raise LookupError(f"{op.name} has {len(listed)} samples in {dtype} (asked for sample {index})")
        if values_fingerprint(listed[index]) != prints[index]:
            listed, prints = self.generated(op, dtype, fresh=True)
        return listed[index], prints[index]

    def __reduce__(self):
        return _Samples, ()


@dataclass(frozen=True)
class DeclaredSuite:
    """A suite made of :class:`Op` declarations (see the module's docstring). A suite object:
    ``with_mode`` gives the same suite in another mode."""

    name: str
    ops: tuple[Op, ...]
    mode: str = "fast"
    engine: str = "torch"
    _samples: _Samples = field(default_factory=_Samples, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name or SEPARATOR in self.name:
            raise ValueError(f"bad suite name {self.name!r}: non-empty, without '::'")
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r} (choose from {', '.join(MODES)})")
        names = [op.name for op in self.ops]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"suite {self.name!r}: ops declared twice: {', '.join(twice)}")

    def with_mode(self, mode: str) -> DeclaredSuite:
        return dataclasses.replace(self, mode=mode)

    def prepare(self) -> None:
        """Nothing to load: samples are generated per op when its cases are listed or built."""

    @functools.cached_property
    def _by_name(self) -> dict[str, Op]:
        return {op.name: op for op in self.ops}

    def op(self, name: str) -> Op:
        if name not in self._by_name:
            raise UsageError(f"unknown op {name!r} in suite {self.name!r}{hint(name, self._by_name)}")
        return self._by_name[name]

    def groups(self, selection: Selection) -> Iterator[GroupInfo | CaseInfo]:
        """A group per op and dtype with something to run; the cases not run (skipped,
        xfail), with their reason. From the declarations only: no sample is generated."""
        ops = [self.op(name) for name in selection.ops] if selection.ops else list(self.ops)
        dtypes = self._selected_dtypes(selection)
        unknown = [c for c in selection.checks if c not in CHECK_KINDS]
        if unknown:
            raise UsageError(f"unknown check kind {unknown[0]!r} (choose from {', '.join(CHECK_KINDS)})")
        for op in ops:
            for dtype in (d for d in op.dtypes if dtypes is None or d in dtypes):
                runnable = []
                for check in (c for c in CHECK_KINDS if c in op.checks and c in selection.checks):
                    status, reason = op.status(check, dtype)
                    case = CaseId(self.name, op.name, dtype, check)
                    if status == RUN:
                        runnable.append(check)
                    elif selection.wants(case):
                        yield CaseInfo(case, status, reason)
                if runnable:
                    yield GroupInfo(self.name, op.name, dtype, tuple(runnable))

    def _selected_dtypes(self, selection: Selection) -> tuple[str, ...] | None:
        declared = {d for op in self.ops for d in op.dtypes}
        for dtype in selection.dtypes or ():
            if dtype not in declared:
                raise UsageError(f"unknown dtype {dtype!r} for suite {self.name!r} (choose from {', '.join(declared)})")
        return selection.dtypes

    def list_group(self, group: GroupInfo, selection: Selection) -> list[CaseInfo]:
        """The group's cases: per check kind, a case per sample, with its fingerprint (and
        its input elements as a cost hint in slow mode, where each costs two evaluations)."""
        op = self.op(group.op)
        try:
            listed, prints = self._samples.generated(op, group.dtype)
        except Exception as e:  # the op's sample generator is broken: report it, go on
            message = f"generating the samples failed: {type(e).__name__}: {e}"
            cases = [CaseInfo(CaseId(self.name, op.name, group.dtype, check), ERROR, message) for check in group.checks]
            return [case for case in cases if selection.wants(case.id)]
        cases = []
        for check in group.checks:
            for index, (inputs, print_) in enumerate(zip(listed, prints)):
                case = CaseId(self.name, op.name, group.dtype, check, index)
                if selection.wants(case):
                    cases.append(CaseInfo(case, RUN, "", print_, self._cost(inputs)))
        return cases

    def _cost(self, inputs: tuple) -> int:
        if self.mode == "fast":
            return 0
        return sum(x.numel() for x in inputs if isinstance(x, torch.Tensor) and x.requires_grad)

    def cases(self, selection: Selection) -> Iterator[CaseInfo]:
        return enumerate_cases(self, selection)

    def build(self, case: CaseId) -> BuiltCase:
        op = self.op(case.op)
        if case.sample is None or case.dtype not in op.dtypes or case.check not in op.checks:
            raise LookupError(f"{case}: not a runnable case of suite {self.name!r}")
        inputs, print_ = self._samples.sample(op, case.dtype, case.sample)
        calls = tuple(CheckCall(c.function, {**c.kwargs, **op.options}) for c in check_calls(op, case.check, self.mode))
        return BuiltCase(
            id=case,
            func=op.function,
            inputs=inputs,
            calls=calls,
            fingerprint=print_,
            before_call=functools.partial(seed_everything, case_seed(case)),
        )


def declare_suite(name: str, ops: Iterable[Op], mode: str = "fast") -> DeclaredSuite:
    """A suite called ``name`` made of ``ops`` (see :mod:`distcheck.suites.declare`)."""
    return DeclaredSuite(name, tuple(ops), mode)
