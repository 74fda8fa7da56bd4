"""The suite interface: a suite enumerates cases by stable ids and rebuilds any case from its id.

A **case** is one operator × one sample × one dtype × one check kind, named by a readable id::

    torch-opinfo::nn.functional.conv2d::float64::sample3::gradgrad

A test the suite does not run at all (skipped or expected to fail, as a whole) is one case
without a sample part: ``torch-opinfo::cov::float64::grad``. A case on a device other than the
CPU names the device type after the op (``torch-opinfo::sinh::cuda::float64::sample0::grad``);
a CPU case names none (see :mod:`distcheck.devices`).

Enumeration comes in two steps, so that the driver of a run never generates a sample:
:meth:`Suite.groups` names the **groups** (an op in a dtype) from metadata alone, with the
cases decided without running (skipped, xfail); :meth:`Suite.list_group` lists a group's
runnable cases — generating its samples, fingerprinting them — where the group's cases will
run (a worker). A worker rebuilds any case from its id alone (:meth:`Suite.build`,
deterministic seeding: no tensors travel with a task) and the runner compares the rebuilt
inputs' fingerprint with the listed one, so that a worker never silently checks other numbers.
A suite without ``groups`` / ``list_group`` is enumerated whole by :meth:`Suite.cases`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

from distcheck.devices import CPU, DEVICE_TYPES, device_type
from distcheck.kinds import CheckKind, Status

CHECK_KINDS = tuple(CheckKind)  # in the order of reports and listings
# the gradient tests of an op's function (the other kinds: its in-place variant's, fail_gradgrad)
GRADCHECK_KINDS = CHECK_KINDS[:4]
MODES = ("fast", "slow")
SEPARATOR = "::"
_SAMPLE = "sample"  # the part before the check kind of a sample's case id: sampleN

# a case's status before it runs (error: the suite could not even enumerate it properly)
RUN, SKIPPED, XFAIL, ERROR = Status.RUN, Status.SKIPPED, Status.XFAIL, Status.ERROR


class UsageError(ValueError):
    """A bad suite, check, dtype or op name (the command line reports it, exit status 2)."""


def read_json(path: str, what: str = "", error: type[UsageError] = UsageError) -> Any:
    """The JSON in the file at ``path``; ``error`` (one line, after ``what``) if it cannot be
    read or is not JSON (reports, durations files and recordings are all read this way)."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, UnicodeDecodeError) as e:
        raise error(f"{what}cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
    except json.JSONDecodeError as e:
        raise error(f"{what}{path} is not JSON ({e.msg}, line {e.lineno})") from None


@dataclass(frozen=True)
class CaseId:
    """The parts of a case id: ``suite::op[::device]::dtype[::sampleN]::check`` (``device``:
    None on the CPU, else the device type, e.g. ``cuda``)."""

    suite: str
    op: str
    dtype: str
    check: CheckKind
    sample: int | None = None
    device: str | None = None

    def __str__(self) -> str:
        return self.text

    def __reduce__(self):
        # its fields and text as they are: a listing's ids load on the driver without a
        # dataclass state to set field by field (see _load_case_id)
        return _load_case_id, (self.suite, self.op, self.dtype, self.check, self.sample, self.text, self.device)

    @cached_property
    def text(self) -> str:
        """The id as text, made once (the driver looks records up by it, several times a case)."""
        parts = [self.suite, self.op] + ([] if self.device is None else [self.device]) + [self.dtype]
        if self.sample is not None:
            parts.append(f"{_SAMPLE}{self.sample}")
        return SEPARATOR.join([*parts, self.check])

    @classmethod
    def parse(cls, text: str) -> CaseId:
        parts = text.split(SEPARATOR)
        if not 4 <= len(parts) <= 6:
            raise ValueError(f"bad case id {text!r}: expected suite::op[::device]::dtype[::sampleN]::check")
        suite, op, *middle, check = parts
        index: int | None = None
        if len(parts) == 6 or (len(parts) == 5 and middle[0] not in DEVICE_TYPES):
            sample = middle.pop()
            # sample(\d+) without a regex: a replay's driver parses every recorded id
            digits = sample[len(_SAMPLE) :]
            if not (sample.startswith(_SAMPLE) and digits.isdecimal()):
                raise ValueError(f"bad case id {text!r}: expected 'sampleN' before the check kind, got {sample!r}")
            index = int(digits)
        device, dtype = middle if len(middle) == 2 else (None, middle[0])
        kind = _CHECK_KINDS.get(check)
        if kind is None:
            raise ValueError(f"bad case id {text!r}: unknown check kind {check!r}")
        if not all((suite, op, dtype)):
            raise ValueError(f"bad case id {text!r}: empty part")
        if device is not None and device not in DEVICE_TYPES:
            raise ValueError(
                f"bad case id {text!r}: unknown device {device!r} (expected one of {', '.join(DEVICE_TYPES)})"
            )
        return cls(suite, op, dtype, kind, index, device)


_CHECK_KINDS = {str(kind): kind for kind in CheckKind}  # a dict lookup: a replay's driver parses every id


def check_of(text: str) -> str:
    """The check kind of a case id's text (its last part), without parsing the id."""
    return text[text.rindex(SEPARATOR) + len(SEPARATOR) :]


def group_of(text: str) -> tuple[str, str]:
    """``(op, dtype)`` of a case id's text (its group, as :attr:`CaseInfo.group`), without parsing
    the id: the op is its second part, the dtype the one before the sample part or the check kind."""
    parts = text.split(SEPARATOR)
    return parts[1], parts[-3] if parts[-2].startswith(_SAMPLE) else parts[-2]


@dataclass(frozen=True)
class CaseInfo:
    """One enumerated case. ``status`` is ``run``, ``skipped``, ``xfail`` or ``error`` (with
    ``reason``); a runnable case has the ``fingerprint`` of its inputs, and may have a ``cost``
    hint (in the suite's units, e.g. input elements; 0: small or unknown): dispatchers start
    the costliest cases first."""

    id: CaseId
    status: Status = RUN
    reason: str = ""
    fingerprint: str | None = None
    cost: int = 0

    def __reduce__(self):
        return _load_case_info, (self.id, self.status, self.reason, self.fingerprint, self.cost)

    @property
    def key(self) -> str:
        return self.id.text

    @property
    def group(self) -> tuple[str, str]:
        """Cases of one group share their inputs' construction (a worker builds it once)."""
        return self.id.op, self.id.dtype


def _load_case_id(
    suite: str, op: str, dtype: str, check: str, sample: int | None, text: str, device: str | None = None
) -> CaseId:
    """A pickled :class:`CaseId`, its text made already. The driver loads one per case it is
    told of (a listing, a batch): the fields set at once cost it a third less than pickle's
    default state of a frozen dataclass."""
    case = object.__new__(CaseId)
    case.__dict__.update(suite=suite, op=op, dtype=dtype, check=check, sample=sample, text=text, device=device)
    return case


def _load_case_info(case: CaseId, status: str, reason: str, fingerprint: str | None, cost: int) -> CaseInfo:
    """A pickled :class:`CaseInfo` (see :func:`_load_case_id`)."""
    info = object.__new__(CaseInfo)
    info.__dict__.update(id=case, status=status, reason=reason, fingerprint=fingerprint, cost=cost)
    return info


@dataclass(frozen=True)
class GroupInfo:
    """One op in one dtype of a suite: the unit in which cases are listed (a worker lists a
    group's samples, fingerprints and cost hints, then runs its cases). ``checks``: the check
    kinds to list (those the suite runs for this op and dtype)."""

    suite: str
    op: str
    dtype: str
    checks: tuple[str, ...]

    @property
    def key(self) -> tuple[str, str]:
        """As :attr:`CaseInfo.group` of its cases."""
        return self.op, self.dtype

    def __str__(self) -> str:
        return SEPARATOR.join((self.suite, self.op, self.dtype))


@dataclass(frozen=True)
class Selection:
    """Which cases to enumerate: check kinds, dtypes and op names (None: all), and a substring
    the case id must contain."""

    checks: tuple[str, ...] = CHECK_KINDS
    dtypes: tuple[str, ...] | None = None
    ops: tuple[str, ...] | None = None
    substring: str | None = None

    def __post_init__(self) -> None:
        for name in ("checks", "dtypes", "ops"):
            if getattr(self, name) == ():  # an empty list selects nothing: never read as "all"
                every = "" if name == "checks" else f" (None: every one of {name})"
                raise UsageError(f"Selection({name}=()) selects no case{every}")

    def wants(self, case: CaseId) -> bool:
        return self.wants_text(str(case))

    def wants_text(self, case: str) -> bool:
        """:meth:`wants` of a case id's text."""
        return self.substring is None or self.substring in case

    def may_want(self, group: GroupInfo, device: str | None = None) -> bool:
        """Whether the group may hold a wanted case, known before its samples are listed: some
        id ``suite::op[::device]::dtype[::sampleN]::check`` of its check kinds (``device``: the
        id's device part, None on the CPU), whatever N, contains the substring."""
        if self.substring is None:
            return True
        head = SEPARATOR.join([group.suite, group.op, *([device] if device else []), group.dtype])
        for check in group.checks:
            tail = f"{SEPARATOR}{check}"
            if self.substring in head + tail or _in_numbered(self.substring, f"{head}{SEPARATOR}{_SAMPLE}", tail):
                return True
        return False


def _in_numbered(text: str, head: str, tail: str) -> bool:
    """Whether ``text`` is in ``head + N + tail`` for some number N (one digit or more): in the
    head, in the tail, or across the number as a suffix of the head, digits, a prefix of the tail."""
    if text in head or text in tail:
        return True
    for start in range(len(text) + 1):
        if not head.endswith(text[:start]):
            continue
        for end in range(start, len(text) + 1):
            before, digits, after = text[:start], text[start:end], text[end:]
            if (digits.isdecimal() or not digits) and tail.startswith(after) and (digits or not (before and after)):
                return True
    return False


@dataclass(frozen=True)
class CheckCall:
    """One call of ``gradcheck`` or ``gradgradcheck`` with its keyword arguments."""

    function: str  # "gradcheck" or "gradgradcheck"
    kwargs: dict[str, Any]


@dataclass(frozen=True)
class ExpectedError:
    """The case passes if (and only if) a check raises this: an exception of ``type`` whose
    message matches ``pattern`` (``re.search``), as ``assertRaisesRegex``."""

    type: type[BaseException]
    pattern: str

    def matches(self, error: BaseException) -> bool:
        return isinstance(error, self.type) and re.search(self.pattern, str(error)) is not None

    def __str__(self) -> str:
        return f"{self.type.__name__} matching {self.pattern!r}"


@dataclass
class BuiltCase:
    """A case rebuilt from its id: the checked function, its inputs and the calls to make.

    ``before_call`` runs before every call (a suite reseeds its engine's global RNG there, so
    that the random grad-outputs of gradgradcheck and the batched checks are reproducible).
    ``expected_failure``: the reason the case's test is expected to fail (None: it is not): the
    case is run, ``xfail`` if it fails or errs, ``xpass`` if it passes — unless
    ``reference()`` (a :class:`~distcheck.suites.checkers.Checker`: the engine's own checks) fails
    on it: then ``xfail``, with the reference's message, as the engine's own test sees it.
    """

    id: CaseId
    func: Callable
    inputs: tuple
    calls: tuple[CheckCall, ...]
    fingerprint: str
    expected_error: ExpectedError | None = None
    before_call: Callable[[], None] = field(default=lambda: None)
    expected_failure: str | None = None
    reference: Callable[[], Any] | None = None


class Suite(Protocol):
    """A collection of gradient-check cases in one ``mode`` (``fast`` or ``slow``: the mode may
    choose the samples as well as the checks' options). Suite objects are small and picklable
    (workers receive them); expensive state (an op database, samples) is loaded lazily, once
    per process.

    A suite that runs on devices other than the CPU says so in ``devices`` (device types, e.g.
    ``("cpu", "cuda")``; without it: the CPU only) and has ``with_device(device)``, the suite
    on that device (see :func:`on_device`)."""

    name: str
    mode: str
    engine: str  # the distcheck engine of its checks ("torch", ...)

    def prepare(self) -> None:
        """Load what building cases needs (an op database) in this process, once: a worker
        calls it before its cases' clocks start."""

    def cases(self, selection: Selection) -> Iterator[CaseInfo]:
        """Enumerate the selected cases, lazily (in an order that keeps groups together).
        Raises :class:`UsageError` for names the suite does not know."""

    def build(self, case: CaseId) -> BuiltCase:
        """Rebuild a runnable case from its id, deterministically."""


class GroupedSuite(Suite, Protocol):
    """A suite that can be enumerated on workers (both methods, or neither)."""

    def groups(self, selection: Selection) -> Iterator[GroupInfo | CaseInfo]:
        """Cheap, from metadata only (never generates a sample): a :class:`GroupInfo` per op
        and dtype with cases to list, and a :class:`CaseInfo` for every case decided without
        running (skipped, xfail). Raises :class:`UsageError` for names the suite does not know."""

    def list_group(self, group: GroupInfo, selection: Selection) -> list[CaseInfo]:
        """The group's selected cases, in order: runnable ones with their fingerprints and cost
        hints, and any decided while listing (e.g. ``error`` if its samples cannot be made)."""


def devices_of(suite: Suite) -> tuple[str, ...]:
    """The device types ``suite`` runs on (the CPU only, unless it says otherwise)."""
    return tuple(getattr(suite, "devices", (CPU,)))


def on_device(suite: Suite, device: str) -> Suite:
    """``suite`` on ``device`` (a device name, see :mod:`distcheck.devices`): itself for the
    CPU; UsageError for a device type it does not declare."""
    supported = devices_of(suite)
    if device_type(device) not in supported:
        raise UsageError(
            f"suite {suite.name!r} does not run on {device!r} (it declares devices: {', '.join(supported)})"
        )
    if device == CPU and getattr(suite, "device", CPU) == CPU:
        return suite
    return suite.with_device(device)


def expected_to_fail(suite: Suite) -> Callable[[CaseId], bool] | None:
    """The suite's ``expected_to_fail(case)``: whether a runnable case is a sample of a test
    expected to fail, which stops at its first failing sample as PyTorch's test does (see
    :mod:`distcheck.case.first_failure`); None for a suite that runs no such test."""
    return getattr(suite, "expected_to_fail", None)


def is_grouped(suite: Suite) -> bool:
    return callable(getattr(suite, "groups", None)) and callable(getattr(suite, "list_group", None))


def enumerate_cases(suite: Suite, selection: Selection) -> Iterator[CaseInfo]:
    """Every selected case of a grouped suite, listed in this process (what ``cases`` of a
    grouped suite can return)."""
    for item in suite.groups(selection):
        if isinstance(item, GroupInfo):
            yield from suite.list_group(item, selection)
        else:
            yield item
