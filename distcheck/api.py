"""The public API: gradcheck and gradgradcheck, with torch.autograd's signatures and defaults,
plus the keyword-only ``executor``, ``vectorize`` and ``batch_counts``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from distcheck import check
from distcheck.executors import resolve
from distcheck.options import Batching, CheckOptions
from distcheck.reduce.counts import BatchCounts


def gradcheck(
    func: Callable[..., Any],
    inputs: Any,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_batched_forward_grad: bool = False,
    check_forward_ad: bool = False,
    check_backward_ad: bool = True,
    fast_mode: bool = False,
    masked: bool | None = None,
    executor: Any = None,
    vectorize: bool | Batching = True,
    batch_counts: BatchCounts | None = None,
) -> bool:
    """Check the gradients of ``func`` at ``inputs`` against finite differences.

    Same signature, defaults and verdicts as ``torch.autograd.gradcheck``: returns True;
    on failure raises :class:`distcheck.GradcheckError` (a RuntimeError; for torch functions
    also torch's own GradcheckError), or returns False if ``raise_exception=False``.

    ``executor``: None (the ``DISTCHECK_EXECUTOR`` environment variable, else serial
    in-process), ``"serial"``, ``"ray"``, or an executor object. The executor changes where the
    work runs, never a number.

    ``vectorize``: slow-mode Jacobians are computed a batch at a time (the engine's vmap) where
    that is measured faster than torch's loop; a batch decides only a clear pass, everything
    else is judged element by element, so verdicts and messages are torch's. False: always
    element by element; a :class:`distcheck.Batching`: how to decide. ``batch_counts``: a
    :class:`distcheck.BatchCounts` that gets what the comparisons were decided on.
    """
    options = CheckOptions(
        eps=eps,
        atol=atol,
        rtol=rtol,
        nondet_tol=nondet_tol,
        check_undefined_grad=check_undefined_grad,
        check_grad_dtypes=check_grad_dtypes,
        check_batched_grad=check_batched_grad,
        check_batched_forward_grad=check_batched_forward_grad,
        check_forward_ad=check_forward_ad,
        check_backward_ad=check_backward_ad,
        fast_mode=fast_mode,
        masked=masked,
        vectorize=vectorize,
    )
    return check.passes(func, inputs, options, resolve(executor), raise_exception, batch_counts)


def gradgradcheck(
    func: Callable[..., Any],
    inputs: Any,
    grad_outputs: Any = None,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    gen_non_contig_grad_outputs: bool = False,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_fwd_over_rev: bool = False,
    check_rev_over_rev: bool = True,
    fast_mode: bool = False,
    masked: bool = False,
    executor: Any = None,
    vectorize: bool | Batching = True,
    batch_counts: BatchCounts | None = None,
) -> bool:
    """Check second derivatives: gradcheck of ``(inputs, grad_outputs) -> grads``.

    Same signature, defaults and verdicts as ``torch.autograd.gradgradcheck``. Random
    grad-outputs (uniform in [-1, 1], from the engine's global RNG) are made when none are given.
    """
    return check.gradgradcheck(
        func,
        inputs,
        resolve(executor),
        grad_outputs,
        eps=eps,
        atol=atol,
        rtol=rtol,
        gen_non_contig_grad_outputs=gen_non_contig_grad_outputs,
        raise_exception=raise_exception,
        nondet_tol=nondet_tol,
        check_undefined_grad=check_undefined_grad,
        check_grad_dtypes=check_grad_dtypes,
        check_batched_grad=check_batched_grad,
        check_fwd_over_rev=check_fwd_over_rev,
        check_rev_over_rev=check_rev_over_rev,
        fast_mode=fast_mode,
        masked=masked,
        vectorize=vectorize,
        batch_counts=batch_counts,
    )
