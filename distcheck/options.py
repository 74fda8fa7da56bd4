"""The options of one gradient check (gradcheck's keyword arguments, validated), and how its
slow-mode Jacobians are batched (``vectorize=``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Batching:
    """How a check's work is batched (``vectorize=`` of the checks: True is ``Batching()``).

    ``min_seconds``: a workload whose loop is estimated under it stays element by element.
    ``measure``: time a batch against the loop (False: batch whatever the engine can, untimed —
    for tests). ``most_items``: items per batch at most. ``budget``: the bytes a batch may hold
    (None: the process's block budget, ``$DISTCHECK_BLOCK_MB``)."""

    min_seconds: float = 0.005
    measure: bool = True
    most_items: int = 256
    budget: float | None = None

    def __post_init__(self) -> None:
        if self.most_items < 2:
            raise ValueError(f"Batching: most_items must be at least 2, got {self.most_items}")


@dataclass(frozen=True)
class CheckOptions:
    eps: float = 1e-6
    atol: float = 1e-5
    rtol: float = 1e-3
    nondet_tol: float = 0.0
    check_undefined_grad: bool = True
    check_grad_dtypes: bool = False
    check_batched_grad: bool = False
    check_batched_forward_grad: bool = False
    check_forward_ad: bool = False
    check_backward_ad: bool = True
    fast_mode: bool = False
    masked: bool | None = None
    vectorize: Batching | None = Batching()  # None: every Jacobian element by element, as torch
    # The analytical Jacobian's units before the numerical one's, so that an error the backward
    # raises (a derivative not implemented) ends the check before the finite differences run.
    # The check fails exactly when torch's does (the error is raised either way, after the
    # numerical Jacobian in torch's order, which its own errors would precede): for the cases of
    # a suite whose verdict only asks whether the check fails (a test expected to fail).
    analytical_first: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.vectorize, bool):
            object.__setattr__(self, "vectorize", Batching() if self.vectorize else None)
        if self.vectorize is not None and not isinstance(self.vectorize, Batching):
            raise TypeError(
                f"gradcheck: vectorize must be True, False or a distcheck.Batching, got {type(self.vectorize).__name__}"
            )
        # The reference's own argument checks, with its exception type (AssertionError).
        if not (self.check_forward_ad or self.check_backward_ad):
            raise AssertionError("Expected at least one of check_forward_ad or check_backward_ad to be True")
        if self.check_batched_grad and not self.check_backward_ad:
            raise AssertionError("Setting check_batched_grad=True requires check_backward_ad to be True")
        if self.check_batched_forward_grad and not self.check_forward_ad:
            raise AssertionError("Setting check_batched_forward_grad=True requires check_forward_ad to be True")
        for name in ("eps", "atol", "rtol", "nondet_tol"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"gradcheck: {name} must be a number, got {type(value).__name__}")
            if value != value or (name != "eps" and value < 0):
                raise ValueError(f"gradcheck: {name} must be a non-negative number, got {value}")
        if self.eps == 0 or abs(self.eps) == float("inf"):
            raise ValueError(f"gradcheck: eps must be a nonzero finite number, got {self.eps}")
