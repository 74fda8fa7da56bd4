"""The small vocabularies modules exchange, as types: what a Jacobian stage differentiates
(:class:`Mode`), which part of a complex value is checked (:class:`Part`), the auxiliary checks
(:class:`AuxCheck`), the keys of a check's function variants (:class:`VariantKey`), why a
Jacobian comparison was not decided on batched blocks (:class:`Fallback`); and a suite
run's words: the check kinds of a case (:class:`CheckKind`), a case's status before it runs
(:class:`Status`), its verdict (:class:`Verdict`), and why a worker running it died
(:class:`DeathKind`).

All are ``str``-valued, so that they serialize (JSON reports, run folders, failure blocks) and
compare as the strings they replace (a record read back from an older run folder, whose verdict
is a plain string, equals and hashes as the member); code builds and dispatches on the types.
"""

from __future__ import annotations

from enum import StrEnum


class Mode(StrEnum):
    """How analytical Jacobians are computed: reverse mode (rows by VJPs) or forward mode
    (columns by JVPs)."""

    BACKWARD = "backward"
    FORWARD = "forward"


class Part(StrEnum):
    """A part of complex values: torch checks a complex output (forward mode: input) as two
    real functions, imaginary part first."""

    REAL = "real"
    IMAG = "imag"

    @property
    def other(self) -> Part:
        return Part.IMAG if self is Part.REAL else Part.REAL


PARTS_IN_TORCH_ORDER = (Part.IMAG, Part.REAL)


class AuxCheck(StrEnum):
    """The auxiliary checks (beyond the Jacobian comparison), in the words of torch's options."""

    ZERO_GRAD_OUTPUT = "zero_grad_output"
    UNDEFINED_GRAD = "undefined_grad"
    UNDEFINED_FORWARD_GRAD = "undefined_forward_grad"
    BATCHED_GRAD = "batched_grad"
    BATCHED_FORWARD_GRAD = "batched_forward_grad"


class VariantKey(str):
    """The key of a function variant in a check's subject: the function itself (``"f"``), the
    part of its complex outputs (``"imag"``) or inputs (``"inputs-imag"``), both parts of its
    complex outputs side by side (``"parts"``, see :data:`OUTPUT_PARTS`), and the twin of a
    variant whose sparse inputs finite differences see fully specified (``"f#dense"``)."""

    __slots__ = ()

    @classmethod
    def of(cls, part: Part | None = None, inputs: bool = False) -> VariantKey:
        if part is None:
            return FUNCTION
        return cls(f"inputs-{part}" if inputs else str(part))

    def densified(self) -> VariantKey:
        return VariantKey(f"{self}#dense")


FUNCTION = VariantKey("f")
# The function's outputs as their imaginary parts, then their real parts (PARTS_IN_TORCH_ORDER):
# one evaluation gives the finite differences of both parts' checks.
OUTPUT_PARTS = VariantKey("parts")


class Fallback(StrEnum):
    """Why a slow-mode Jacobian comparison was judged element by element (torch's loops) and not
    decided on batched blocks. Planned so: the engine has no vectorizing map, the work is too
    small to pay for a batch, a batch measured no faster than the loop, the engine cannot batch
    the function (each kind of vmap error), the function sees its input elsewhere than through
    its argument, a sparse input, a single item over the block budget. Found by the reducer: the
    exact path failed, an element near its tolerance, a backward not reentrant on the batch,
    gradients of the wrong size or dtype, a spot check that disagreed."""

    NO_VMAP = "no_vmap"
    SMALL = "small"
    SLOWER = "slower"
    NO_BATCHING_RULE = "no_batching_rule"
    DYNAMIC_SHAPE = "dynamic_shape"
    ITEM = "item"
    RANDOMNESS = "randomness"
    AUTOGRAD_FUNCTION = "autograd_function"
    VMAP_ERROR = "vmap_error"
    CLOSURE = "closure"
    SPARSE = "sparse"
    MEMORY = "memory"
    FAILURE = "failure"
    NEAR_TOLERANCE = "near_tolerance"
    NONDETERMINISTIC = "nondeterministic"
    ATTRIBUTES = "attributes"
    SPOT_CHECK = "spot_check"


class CheckKind(StrEnum):
    """The check a case runs, named after PyTorch's tests (``test_fn_grad``, ...); the order of
    the members is the order of reports and listings."""

    GRAD = "grad"
    GRADGRAD = "gradgrad"
    FWGRAD = "fwgrad"
    FWGRAD_BWGRAD = "fwgrad_bwgrad"
    INPLACE_GRAD = "inplace_grad"
    INPLACE_GRADGRAD = "inplace_gradgrad"
    INPLACE_FWGRAD = "inplace_fwgrad"
    FAIL_GRADGRAD = "fail_gradgrad"


class Status(StrEnum):
    """A case's status before it runs: ``run`` it, or decided without running (``error``: the
    suite could not even enumerate it properly); a decided case's verdict is :attr:`verdict`."""

    RUN = "run"
    SKIPPED = "skipped"
    XFAIL = "xfail"
    ERROR = "error"

    @property
    def verdict(self) -> Verdict:
        """The verdict of a case decided with this status (``run`` has none)."""
        return _DECIDED[self]


class Verdict(StrEnum):
    """What a run says about a case. ``flaky``: bad, then passed when run again (with reruns;
    counted only in runs that have some)."""

    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"
    SKIPPED = "skipped"
    XFAIL = "xfail"
    XPASS = "xpass"  # a case of a test expected to fail that passed
    TIMEOUT = "timeout"
    FLAKY = "flaky"

    @property
    def bad(self) -> bool:
        """A verdict that makes a run fail."""
        return self in BAD_VERDICTS


BAD_VERDICTS = (Verdict.FAIL, Verdict.ERROR, Verdict.TIMEOUT)
_DECIDED = {Status.SKIPPED: Verdict.SKIPPED, Status.XFAIL: Verdict.XFAIL, Status.ERROR: Verdict.ERROR}


class DeathKind(StrEnum):
    """Why a Ray task running cases died (see :mod:`distcheck.runner.deaths`)."""

    NODE_LOST = "node lost"
    OUT_OF_MEMORY = "out of memory"
    CRASHED = "crashed"
    CANCELLED = "cancelled"
    OTHER = "other"
