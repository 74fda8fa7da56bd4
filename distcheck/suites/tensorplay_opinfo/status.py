"""Which tests of an op this suite runs on tensorplay, and why it skips the others.

In this order (the first reason that applies is the case's):

1. PyTorch's own status of the test (:func:`~distcheck.suites.torch_opinfo.status.pytorch_status`):
   a test PyTorch skips or expects to fail is ``skipped`` / ``xfail`` here with the same reason;
2. forward-mode checks (``fwgrad``, ``fwgrad_bwgrad``): tensorplay has no forward-mode AD that
   distcheck can check (the engine raises ``EngineCapabilityError``: see
   :data:`~distcheck.engines.tensorplay_wording.NO_FORWARD_AD`);
3. an op tensorplay lacks, or whose Python op or ``gradcheck_wrapper`` uses something
   tensorplay lacks (:func:`~distcheck.suites.tensorplay_opinfo.lookup.missing_reason`);
4. an op whose tensorplay implementation kills the process (:data:`CRASHES`): a serial run
   would die with it, a Ray run would lose a worker per sample.

Samples that do not convert are skipped one by one (see the suite).
"""

from __future__ import annotations

import tensorplay as tp

from distcheck.suites.base import RUN, SKIPPED
from distcheck.suites.tensorplay_opinfo.lookup import missing_reason
from distcheck.suites.torch_opinfo.status import pytorch_status

VERSION = tp.__version__.split("+")[0]
FORWARD_CHECKS = ("fwgrad", "fwgrad_bwgrad")
NO_FORWARD_AD = f"tensorplay {VERSION} has no forward-mode AD"

_FPE = "SIGFPE"
_HEAP = "SIGSEGV or SIGABRT: heap corruption"

# Ops (OpInfo names) whose tensorplay 1.0.0 implementation kills the process on some of op_db's
# samples, with the signal seen. SIGFPE is an integer division by zero on empty inputs (0 × 0
# matrices, zero batches, a (5, 0, 0) softmax); the others corrupt the heap ("free(): invalid
# size", "malloc(): unaligned tcache chunk"), on empty batches (the linalg solvers) and on plain
# inputs (fft.*, and permute with negative dims), where the crash may come a few calls later.
# Found by running every grad and gradgrad case of the suite (fast mode) in child processes,
# restarting after each death, then confirmed by running each op's cases alone in a fresh
# process. Their other samples run, but skipping whole ops keeps the list independent of
# sample numbering (and of where a heap corruption happens to surface).
CRASHES = {
    "cholesky": _FPE,
    "cholesky_inverse": _FPE,
    "cholesky_solve": _FPE,
    "log_softmax": _FPE,
    "nn.functional.softmin": _FPE,
    "nn.functional.unfold": _FPE,
    "softmax": _FPE,
    "triangular_solve": _FPE,
    **dict.fromkeys(
        [
            "fft.fft",
            "fft.fftn",
            "fft.hfft",
            "fft.hfft2",
            "fft.hfftn",
            "fft.ifft",
            "fft.ifftn",
            "fft.ihfft",
            "fft.ihfft2",
            "fft.ihfftn",
            "fft.irfft",
            "fft.rfft",
            "fft.rfftn",
            "linalg.inv",
            "linalg.inv_ex",
            "linalg.lu_solve",
            "linalg.matrix_power",
            "linalg.solve",
            "linalg.solve_ex",
            "linalg.solve_triangular",
            "lu_solve",
            "permute",
            "permute_copy",
        ],
        _HEAP,
    ),
}


def crash_reason(name: str) -> str:
    return f"tensorplay {VERSION} crashes the process ({CRASHES[name]})"


def tensorplay_status(op, check: str, dtype) -> tuple[str, str]:
    """``(status, reason)`` of the check kind ``check`` of ``op`` in ``dtype`` on tensorplay:
    ``run`` (reason empty), ``skipped`` or ``xfail``."""
    status, reason = pytorch_status(op, check, dtype)
    if status != RUN:
        return status, reason
    if check in FORWARD_CHECKS:
        return SKIPPED, NO_FORWARD_AD
    missing = missing_reason(op)
    if missing is not None:
        return SKIPPED, missing
    if op.name in CRASHES:
        return SKIPPED, crash_reason(op.name)
    return RUN, ""
