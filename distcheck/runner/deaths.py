"""Why a Ray task running cases died, and what the dispatch does about it (pure: no Ray calls).
A node lost is not the case's fault: its cases run again elsewhere, up to
:data:`MAX_NODE_LOSSES` nodes each; out of memory (Ray's memory monitor) is an ``error`` with
Ray's figures; a crash reruns the case once, alone, then is an ``error`` saying whether it
reproduced. Errors are told apart by class name (Ray renames modules more often than these
classes) and, for node loss, by the message Ray gives.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from distcheck.kinds import DeathKind
from distcheck.records.case_record import ERROR, CaseRecord

NODE_LOST, OUT_OF_MEMORY, CRASHED, CANCELLED, OTHER = DeathKind  # its members, in their order
MAX_NODE_LOSSES = 3  # per case, then it is reported error

_KINDS = {
    "NodeDiedError": NODE_LOST,
    "LocalRayletDiedError": NODE_LOST,
    "ObjectLostError": NODE_LOST,  # and its subclasses: the result lived on a lost node
    "OutOfMemoryError": OUT_OF_MEMORY,
    "TaskCancelledError": CANCELLED,
    "WorkerCrashedError": CRASHED,
    "ActorDiedError": CRASHED,
}
_NODE_MESSAGES = (
    "node it was running on is dead or unavailable",
    "node died",
    "raylet died",
    "node was removed",
    "node is dead",
)
_MEMORY = re.compile(r"memory used=[^)]*\)|was running was [^,]*?\(\d[\d.]*\)|threshold of [\d.]+")
_EXIT_CODE = re.compile(r"exit(?:ed with)? code:? ?(-?\d+)", re.IGNORECASE)
_SIGNAL = re.compile(r"\b(SIG[A-Z]+)\b")


@dataclass(frozen=True)
class WorkerDeath:
    """One Ray error, classified: its ``kind`` and a short ``message`` for a case's record."""

    kind: DeathKind
    message: str


def _causes(error: BaseException) -> list[BaseException]:
    """The error and what it wraps (a RayTaskError's ``cause``, ``__cause__``), outermost first."""
    chain, seen = [], set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        chain.append(error)
        error = getattr(error, "cause", None) or error.__cause__
    return chain


def _kind(error: BaseException) -> DeathKind:
    for link in _causes(error):
        for cls in type(link).__mro__:
            if cls.__name__ in _KINDS:
                return _KINDS[cls.__name__]
    text = str(error).lower()
    return NODE_LOST if any(phrase in text for phrase in _NODE_MESSAGES) else OTHER


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def crash_detail(text: str) -> str:
    """The signal or exit status a crash message names ("" if none)."""
    found = _SIGNAL.search(text)
    if found:
        return f"signal {found.group(1)}"
    found = _EXIT_CODE.search(text)
    return f"exit code {found.group(1)}" if found else ""


def classify(error: BaseException) -> WorkerDeath:
    """The kind of a Ray task error, with a one-line message that says what happened."""
    kind, text = _kind(error), str(error)
    if kind == NODE_LOST:
        return WorkerDeath(kind, f"the node running it was lost ({_first_line(error)})")
    if kind == OUT_OF_MEMORY:
        figures = "; ".join(m.group(0) for m in _MEMORY.finditer(text)) or _first_line(error)
        return WorkerDeath(kind, f"out of memory: Ray's memory monitor killed the worker ({figures})")
    if kind == CRASHED:
        detail = crash_detail(text)
        how = f" ({detail})" if detail else ""
        return WorkerDeath(kind, f"the worker running this case crashed{how}: {_first_line(error)}")
    if kind == CANCELLED:
        return WorkerDeath(kind, "the task was cancelled")
    return WorkerDeath(kind, f"the worker running this case died: {type(error).__name__}: {_first_line(error)}")


class Deaths:
    """Remembers, per case, the nodes it lost and its first crash; decides what comes next."""

    def __init__(self):
        self.node_losses: dict[str, int] = {}
        self.crashes: dict[str, str] = {}

    def node_lost(self, cases: list[str], death: WorkerDeath) -> dict[str, str]:
        """A task lost its node with ``cases`` unreported: they run again, except those that
        have now lost too many nodes, returned with their error message."""
        exhausted = {}
        for case in cases:
            losses = self.node_losses[case] = self.node_losses.get(case, 0) + 1
            if losses >= MAX_NODE_LOSSES:
                limit = f"at most {MAX_NODE_LOSSES}"
                exhausted[case] = f"lost {losses} nodes while running this case ({limit}): {death.message}"
        return exhausted

    def died(self, case: str, death: WorkerDeath) -> str | None:
        """A task died in ``case`` (known to be the one; not a node loss): None to run it once
        more alone (a first crash), else the message of its ``error``."""
        if death.kind != CRASHED:
            return death.message
        first = self.crashes.get(case)
        if first is None:
            self.crashes[case] = death.message
            return None
        return f"{first}; run again alone, it crashed again (reproduced)"

    def settle(self, record: CaseRecord) -> CaseRecord:
        """The record of a case that ran to its end: an ``error`` if it crashed before (a crash
        is never a pass), saying that the crash did not reproduce; else ``record`` itself."""
        first = self.crashes.pop(record.id, None) if self.crashes else None  # (the driver settles every record)
        if first is None:
            return record
        lines = record.message.strip().splitlines()
        rerun = f"{record.verdict}: {lines[0]}" if lines else record.verdict
        message = f"{first}; run again alone, it did not crash (the rerun: {rerun})"
        return replace(record, verdict=ERROR, message=message)
