"""The gradcheck functions a case's calls are judged with (a :class:`Checker`): distcheck's, on
an executor (the runner's), or the engine's own (a suite's reference, see
:attr:`~distcheck.suites.base.BuiltCase.reference`)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Checker:
    """The gradcheck / gradgradcheck functions a case is judged with (torch's signatures), and
    the exception types that mean "the gradients are wrong"; ``expecting_failure``: the checker
    for a case expected to fail, whose verdict asks only whether it fails (None: this one)."""

    gradcheck: Callable[..., bool]
    gradgradcheck: Callable[..., bool]
    failures: tuple[type[BaseException], ...]
    expecting_failure: Checker | None = None


def torch_checker() -> Checker:
    """torch.autograd's own checks (the reference)."""
    reference = importlib.import_module("torch.autograd.gradcheck")  # the module, not the function
    return Checker(reference.gradcheck, reference.gradgradcheck, (reference.GradcheckError,))
