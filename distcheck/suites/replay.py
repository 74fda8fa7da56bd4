"""Suite ``replay``, public (docs/running.md): a recorded run replayed, each case taking its
recorded time, through the real runner (to measure the dispatcher and Ray at many workers
without the cores to check).

The recording is a JSON report of ``distcheck run --json`` (``{"summary": ..., "cases": [...]}``).
Every replayed case is a real gradient check of a tiny numpy function, so that the real
machinery runs (rebuild, fingerprint, budget estimate, judge, and for split cases the Jacobian
chunks):

- a case that ran whole (``tasks`` ≤ 1): a fast-mode check whose ``before_call`` sleeps the
  recorded seconds; a recorded ``fail`` replays with a wrong VJP (fails), a recorded ``error``
  with a function that raises; every other recorded verdict passes (a case the memory budget
  skipped on its worker too: the replay has no large Jacobian);
- a split case (``tasks`` > 1): a slow-mode check of a function of 1,000 input elements whose
  every evaluation sleeps, so that the whole check is the case's recorded work (its estimate's
  seconds when recorded, else its seconds): the real budget estimate then finds it worth
  splitting, and the real split machinery cuts it into column chunks;
- a case decided without running (``tasks`` 0: skipped, xfail, an enumeration error) comes
  back as such.

Case ids are the recorded ones (the suite takes the recorded suite's name), so that a replay's
report, and ``--durations`` of the recorded run, line up with the recording case by case.
Groups are the recording's op × dtype. Workers read the report themselves, once per process
(the path travels, never the cases): the machines of a loopback cluster share the filesystem.
``scale`` multiplies every recorded time (0.1: a ten times shorter replay). With ``checks``
off, a whole case that passed only sleeps its time (in ``build``) and makes no check call: on a
loopback cluster of many workers on few cores, the checks' own CPU (about a millisecond per
fast-mode check) would otherwise be what the replay measures. Those sleeps are pooled per worker
process (:class:`PooledSleep`): a case owes its time, and the worker sleeps once what it owes
reaches ``POOL`` seconds, so that the worker's total time is the recorded total (to within one
pool) while it wakes up once per ``POOL`` rather than once per case (each wakeup of a
time.sleep costs CPU, which 64 workers on 2 cores would otherwise spend: docs/scale.md).
"""

from __future__ import annotations

import functools
import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from distcheck.devices import DEVICE_TYPES
from distcheck.engines.numpy_engine import numpy_function
from distcheck.suites import BuiltCase, CaseId, CaseInfo, CheckCall, GroupInfo, Selection, UsageError, enumerate_cases
from distcheck.suites.base import CHECK_KINDS, ERROR, RUN, SEPARATOR, SKIPPED, XFAIL, read_json

# input elements of a split case's function: with its one output, at least the 1,000 elements
# from which the budget estimate takes the fastest of three timed evaluations (one evaluation,
# timed alone, can be many times too long on a busy machine)
COLUMNS = 1000
_UNRUN = {SKIPPED: SKIPPED, XFAIL: XFAIL}  # recorded verdict of a case decided without running -> status


class Recorded(NamedTuple):
    """One case of the recording: what a replay needs of it (a named tuple: a replay's driver
    reads every recorded case, and a frozen dataclass takes several times longer to make)."""

    id: CaseId
    verdict: str
    message: str
    seconds: float  # as recorded (wall time where it ran)
    tasks: int
    work: float  # seconds of work: a split case's estimate if recorded, else ``seconds``
    columns: int  # its estimate's input elements (a slow-mode cost hint), 0 if none
    rows: int  # its estimate's output elements, 0 if none
    bytes: int  # its estimate's Jacobians (numerical and analytical), 0 if none

    @property
    def split(self) -> bool:
        return self.tasks > 1

    @property
    def ran(self) -> bool:
        return self.tasks > 0

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(f"{self.id} {self.seconds!r}".encode()).hexdigest()[:16]


class Brief(NamedTuple):
    """What a replay's driver reads of a recorded case to enumerate its group: the driver reads
    every recorded case, and the whole case (:class:`Recorded`) is made only where it runs."""

    id: str
    check: str
    ran: bool
    record: dict


@dataclass(frozen=True)
class Recording:
    """A recorded run: its summary's suite, mode, workers and wall time, and its cases (the
    report's records, each read whole on first use)."""

    suite: str
    mode: str
    workers: int
    seconds: float
    records: tuple[dict, ...]
    outline: dict[tuple[str, str], list[Brief]]  # each op × dtype's cases, in recorded order
    source: str = "report"

    @functools.cached_property
    def cases(self) -> tuple[Recorded, ...]:
        try:
            return tuple(_recorded(r) for r in self.records)
        except (KeyError, TypeError, ValueError) as e:
            raise UsageError(f"{self.source}: not a distcheck JSON report ({type(e).__name__}: {e})") from None

    @functools.cached_property
    def group_outlines(self) -> dict[tuple[str, str], tuple[list[Brief], frozenset[str]]]:
        """Each op × dtype's cases decided without running, and the check kinds of its cases
        that ran: what the driver needs to enumerate the groups of a selection without a
        substring, read once per process (the driver's enumeration then does no work per case)."""
        return {
            key: ([b for b in cases if not b.ran], frozenset(b.check for b in cases if b.ran))
            for key, cases in self.outline.items()
        }

    @functools.cached_property
    def by_id(self) -> dict[CaseId, Recorded]:
        return {case.id: case for case in self.cases}

    @functools.cached_property
    def by_group(self) -> dict[tuple[str, str], list[Recorded]]:
        """The cases of each op × dtype, in recorded order (groups in order of first appearance)."""
        groups: dict[tuple[str, str], list[Recorded]] = {}
        for case in self.cases:
            groups.setdefault((case.id.op, case.id.dtype), []).append(case)
        return groups


def _recorded(record: dict) -> Recorded:
    case = CaseId.parse(record["id"])
    tasks = int(record.get("tasks", 0))
    seconds = float(record.get("seconds", 0.0))
    estimate = record.get("estimate")
    if not estimate:
        return Recorded(case, record["verdict"], record.get("message", ""), seconds, tasks, seconds, 0, 0, 0)
    work = float(estimate["seconds"]) if tasks > 1 and "seconds" in estimate else seconds
    columns, rows, size = (int(estimate.get(k, 0)) for k in ("columns", "rows", "bytes"))
    return Recorded(case, record["verdict"], record.get("message", ""), seconds, tasks, work, columns, rows, size)


def _outline(records: list[dict]) -> dict[tuple[str, str], list[Brief]]:
    """The cases of each op × dtype, read from their ids' parts (a check of the id's shape, its
    check kind and verdict, not a parse: that happens where a case runs)."""
    groups: dict[tuple[str, str], list[Brief]] = {}
    for record in records:
        text, verdict = record["id"], record["verdict"]
        parts = text.split(SEPARATOR)
        on_device = len(parts) > 4 and parts[2] in DEVICE_TYPES  # suite::op::cuda::dtype...
        if len(parts) - on_device not in (4, 5) or parts[-1] not in CHECK_KINDS or not isinstance(verdict, str):
            raise ValueError(f"bad case id {text!r} or verdict {verdict!r}")
        groups.setdefault((parts[1], parts[3] if on_device else parts[2]), []).append(
            Brief(text, parts[-1], int(record.get("tasks", 0)) > 0, record)
        )
    return groups


def parse(report: dict, source: str = "report") -> Recording:
    """The recording in a JSON report (as written by ``distcheck run --json``)."""
    try:
        summary, records = report["summary"], report["cases"]
        outline = _outline(records)
        suite = summary.get("suite") or (records[0]["id"].split(SEPARATOR)[0] if records else "replay")
        header = (
            suite,
            summary.get("mode", "fast"),
            int(summary.get("workers", 1)),
            float(summary.get("seconds", 0.0)),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise UsageError(f"{source}: not a distcheck JSON report ({type(e).__name__}: {e})") from None
    return Recording(*header, tuple(records), outline, source)


@functools.cache
def load(path: str) -> Recording:
    """The recording in the report at ``path``, read once per process."""
    return parse(read_json(path, "the report to replay: "), path)


def _double(x):
    return 2.0 * x


def _double_vjp(factor, x, g):
    return None if g is None else factor * g


def _raise(message, x):
    raise RuntimeError(f"replayed error: {message}")


def _paused_sum(pause, x):
    time.sleep(pause)
    return np.array([2.0 * x.sum()])


def _sum_vjp(x, g):
    return None if g is None else np.full_like(x, 2.0 * g[0])


def _whole_function(case: Recorded):
    """A tiny check with the recorded verdict: a wrong VJP fails, a raising function errs."""
    if case.verdict == "error":
        return numpy_function(functools.partial(_raise, case.message[:200]), vjp=functools.partial(_double_vjp, 2.0))
    factor = 3.0 if case.verdict == "fail" else 2.0
    return numpy_function(_double, vjp=functools.partial(_double_vjp, factor))


def split_shape(work: float) -> tuple[int, float]:
    """Columns and seconds per evaluation of a split case's function: central differences take
    two evaluations per column, so ``2 · columns · pause = work``."""
    return COLUMNS, work / (2 * COLUMNS)


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


POOL = 0.005  # seconds a worker owes before it sleeps them (whole cases that only sleep)


class PooledSleep:
    """Sleeps owed, slept once they reach ``pool`` seconds; what a sleep overshoots is
    subtracted from the next ones. ``sleep`` and ``clock`` default to the time module's,
    looked up at each call."""

    def __init__(self, pool: float = POOL, sleep=None, clock=None):
        self.pool, self.owed = pool, 0.0
        self._sleep, self._clock = sleep, clock

    def __call__(self, seconds: float) -> None:
        self.owed += seconds
        if self.owed < self.pool:
            return
        clock = self._clock or time.perf_counter
        begin = clock()
        (self._sleep or time.sleep)(self.owed)
        self.owed -= clock() - begin


_pooled = PooledSleep()  # this process's


@dataclass(frozen=True)
class ReplaySuite:
    """The replay of the report at ``path`` (see the module's docstring); build it with
    :func:`replay_suite`. ``name`` and ``mode`` are the recorded run's."""

    path: str
    name: str
    mode: str
    scale: float = 1.0
    checks: bool = True
    engine: str = "numpy"

    def recording(self) -> Recording:
        return load(self.path)

    def prepare(self) -> None:
        """Read the recording and index it by case and by group (docs/scale.md), once per worker
        process, paid in a warm-up rather than in the first case."""
        recording = self.recording()
        recording.by_id, recording.by_group  # noqa: B018 (cached properties, computed here)

    def groups(self, selection: Selection) -> Iterator[GroupInfo | CaseInfo]:
        recording = self.recording()
        _check_names(recording, selection)
        outlines = recording.group_outlines
        for (op, dtype), cases in recording.outline.items():
            if selection.ops is not None and op not in selection.ops:
                continue
            if selection.dtypes is not None and dtype not in selection.dtypes:
                continue
            if selection.substring is None:  # the outline of the group, not its cases, read here
                unrun, ran = outlines[op, dtype]
                unrun = [c for c in unrun if c.check in selection.checks]
            else:
                chosen = [c for c in cases if c.check in selection.checks and selection.wants_text(c.id)]
                unrun, ran = [c for c in chosen if not c.ran], frozenset(c.check for c in chosen if c.ran)
            for case in unrun:
                status = _UNRUN.get(case.record["verdict"], ERROR)
                yield CaseInfo(CaseId.parse(case.id), status, case.record.get("message", ""))
            checks = tuple(k for k in CHECK_KINDS if k in ran and k in selection.checks)
            if checks:
                yield GroupInfo(suite=self.name, op=op, dtype=dtype, checks=checks)

    def list_group(self, group: GroupInfo, selection: Selection) -> list[CaseInfo]:
        cases = self.recording().by_group.get(group.key, [])
        return [
            CaseInfo(c.id, RUN, "", c.fingerprint, c.columns if self.mode == "slow" else 0)
            for c in cases
            if c.ran and c.id.check in group.checks and c.id.check in selection.checks and selection.wants(c.id)
        ]

    def cases(self, selection: Selection) -> Iterator[CaseInfo]:
        return enumerate_cases(self, selection)

    def build(self, case: CaseId) -> BuiltCase:
        recorded = self.recording().by_id.get(case)
        if recorded is None or not recorded.ran:
            raise LookupError(f"{case}: not a runnable case of the recording {self.path}")
        if recorded.split:
            columns, pause = split_shape(recorded.work * self.scale)
            func = numpy_function(functools.partial(_paused_sum, pause), vjp=_sum_vjp)
            inputs = (np.linspace(0.1, 1.0, columns),)
            return BuiltCase(case, func, inputs, (CheckCall("gradcheck", {}),), recorded.fingerprint)
        if not self.checks and recorded.verdict not in ("fail", "error"):
            _pooled(recorded.seconds * self.scale)
            return BuiltCase(case, _double, (np.array([0.5]),), (), recorded.fingerprint)
        return BuiltCase(
            case,
            _whole_function(recorded),
            (np.array([0.5, 1.5]),),
            (CheckCall("gradcheck", {"fast_mode": True}),),
            recorded.fingerprint,
            before_call=functools.partial(_sleep, recorded.seconds * self.scale),
        )


def _check_names(recording: Recording, selection: Selection) -> None:
    unknown = [c for c in selection.checks if c not in CHECK_KINDS]
    if unknown:
        raise UsageError(f"unknown check kind {unknown[0]!r} (choose from {', '.join(CHECK_KINDS)})")
    ops = {op for op, _ in recording.outline}
    missing = [op for op in selection.ops or () if op not in ops]
    if missing:
        raise UsageError(f"op {missing[0]!r} is not in the recording")


def replay_suite(path: str, scale: float = 1.0, checks: bool = True) -> ReplaySuite:
    """The replay of the JSON report at ``path``, every recorded time multiplied by ``scale``
    (``checks``: see the module's docstring).
    Raises :class:`UsageError` for a file that is not a readable report, or a scale ≤ 0."""
    if not scale > 0:
        raise UsageError(f"the replay's scale must be positive, got {scale}")
    recording = load(path)
    recording.group_outlines  # noqa: B018 (read with the report: the run's enumeration reads no case)
    return ReplaySuite(path, recording.suite, recording.mode, scale, checks)
