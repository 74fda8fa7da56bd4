"""Which cases are costly, and how long they take: recorded durations (``--durations FILE``, a
previous run's report) or, lacking them, a suite's cost hints.

Costly cases are dispatched alone and longest first; groups (an op in a dtype) are dispatched
longest first too when durations are known. A worker that lists a group applies the same rule
to pick the cases it runs itself, so the rule travels with the task — with the durations of
that group only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from distcheck.suites.base import CaseId, CaseInfo, GroupInfo, UsageError, read_json

COSTLY = 1000  # a cost hint (slow mode: input elements) from which a case goes alone
COSTLY_SECONDS = 1.0  # a recorded duration from which a case goes alone
SECONDS_PER_COST = 1e-3  # a cost hint's rough weight in seconds, to order it among recorded cases
GUIDE = 4  # with durations, a batch holds 1/(GUIDE × workers) of the recorded work not handed out yet
MIN_BATCH_SECONDS = 0.25  # ... but at least this much (a message per batch at most every so often)


@dataclass(frozen=True)
class CostlyRule:
    """``weight(case)``: the expected seconds of a case that goes alone, None for the others.
    ``min_cost`` None: cost hints make no case costly (fast mode). ``batch_seconds``: with
    durations, how much recorded work a batch holds (None: batches are counted in cases)."""

    min_cost: int | None = COSTLY
    min_seconds: float = COSTLY_SECONDS
    durations: Mapping[str, float] = field(default_factory=dict)
    batch_seconds: float | None = None

    def seconds(self, case: CaseInfo) -> float | None:
        """The recorded seconds of ``case``, if known."""
        return self.durations.get(case.key)

    def batch(self, cases: list[CaseInfo], size: int) -> int:
        """How many of ``cases`` (consecutive, not costly) make a batch: ``size`` of them, or with
        ``batch_seconds`` as many as hold that much recorded work (at least one, at most
        ``GUIDE × size``; a case without a record counts as none)."""
        if self.batch_seconds is None:
            return min(size, len(cases))
        total = 0.0
        for k, case in enumerate(cases[: GUIDE * size]):
            total += self.seconds(case) or 0.0
            if total >= self.batch_seconds:
                return k + 1
        return min(len(cases), GUIDE * size)

    def weight(self, case: CaseInfo) -> float | None:
        recorded = self.durations.get(case.key)
        if recorded is not None:
            return recorded if recorded >= self.min_seconds else None
        if self.min_cost is not None and case.cost >= self.min_cost:
            return case.cost * SECONDS_PER_COST
        return None


class Durations:
    """Recorded seconds per case id, indexed by group."""

    def __init__(self, seconds: Mapping[str, float]):
        self._groups: dict[tuple[str, str], dict[str, float]] = {}
        for key, value in seconds.items():
            try:
                case = CaseId.parse(key)
            except ValueError:
                continue
            self._groups.setdefault((case.op, case.dtype), {})[key] = float(value)

    def __len__(self) -> int:
        return sum(len(group) for group in self._groups.values())

    def group_seconds(self, group: GroupInfo) -> float:
        return self.group_seconds_of(group.key)

    @property
    def total(self) -> float:
        return sum(self.group_seconds_of(key) for key in self._groups)

    def group_seconds_of(self, key: tuple[str, str]) -> float:
        return sum(self._groups.get(key, {}).values())

    def rule(self, base: CostlyRule, group: GroupInfo | None = None, batch_seconds: float | None = None) -> CostlyRule:
        """``base`` with the durations of ``group`` (of every group if None)."""
        if group is not None:
            return CostlyRule(base.min_cost, base.min_seconds, self._groups.get(group.key, {}), batch_seconds)
        merged = {key: value for group_seconds in self._groups.values() for key, value in group_seconds.items()}
        return CostlyRule(base.min_cost, base.min_seconds, merged, batch_seconds)


def load_durations(path: str) -> Durations:
    """Durations from a JSON report (``{"cases": [{"id", "seconds"}, ...]}``), a run folder holding
    ``report.json``, or a JSON object ``{case id: seconds}``. Raises :class:`UsageError` (one
    line) for anything else."""
    if os.path.isdir(path):
        path = os.path.join(path, "report.json")
    data = read_json(path, "--durations: ")
    if isinstance(data, dict) and isinstance(data.get("cases"), list):
        seconds = {c["id"]: c["seconds"] for c in data["cases"] if isinstance(c, dict) and "id" in c and "seconds" in c}
    elif isinstance(data, dict) and all(isinstance(v, (int, float)) for v in data.values()):
        seconds = data
    else:
        raise UsageError(f"--durations: {path} is neither a distcheck report nor a {{case id: seconds}} object")
    return Durations(seconds)
