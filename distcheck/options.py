"""The options of one gradient check (gradcheck's keyword arguments, validated)."""

from __future__ import annotations

from dataclasses import dataclass


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

    def __post_init__(self) -> None:
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
