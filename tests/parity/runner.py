"""Run a parity case with torch.autograd or distcheck and describe the outcome comparably."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch

import distcheck
from tests.parity.cases import Case

_TORCH = {"grad": torch.autograd.gradcheck, "gradgrad": torch.autograd.gradgradcheck}
_OURS = {"grad": distcheck.gradcheck, "gradgrad": distcheck.gradgradcheck}


@dataclass(frozen=True)
class Outcome:
    verdict: str  # "pass", "GradcheckError" or the exception's type name
    kind: str  # first line of the message, up to its details
    warned_precision: bool
    message: str = ""

    def comparable(self) -> tuple:
        return self.verdict, self.kind, self.warned_precision


def message_kind(message: str) -> str:
    """The part of a failure message that says what failed (not by how much)."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    for stop in (" (", ": ", "although"):
        first = first.split(stop)[0]
    return first.strip()


def run(case: Case, library: str, **extra) -> Outcome:
    """Build the case afresh (seeded) and run it with ``library`` ("torch" or "distcheck")."""
    built = case.build()
    func, inputs = built[0], built[1]
    kwargs = {**case.options, **(built[2] if len(built) > 2 else {}), **extra}
    check = (_TORCH if library == "torch" else _OURS)[case.kind]
    torch.manual_seed(0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = check(func, inputs, **kwargs)
            verdict, message = ("pass" if result else "returned False"), ""
        except Exception as e:  # the verdict is the exception's kind
            verdict = "GradcheckError" if isinstance(e, _gradcheck_errors()) else _builtin_type(e)
            message = str(e)
    warned = any("double precision" in str(w.message) for w in caught)
    return Outcome(verdict, message_kind(message), warned, message)


def _gradcheck_errors() -> tuple[type, ...]:
    import importlib

    return (importlib.import_module("torch.autograd.gradcheck").GradcheckError, distcheck.GradcheckError)


def _builtin_type(e: BaseException) -> str:
    """The nearest built-in exception class (what ``except`` clauses in user code see)."""
    return next(c.__name__ for c in type(e).__mro__ if c.__module__ == "builtins")
