"""Which cases are costly, and how long they take: recorded durations (``--durations FILE``, a
previous run's report) or, lacking them, a suite's cost hints.

Costly cases are dispatched alone and longest first; groups (an op in a dtype) are dispatched
longest first too when durations are known. A worker that lists a group applies the same rule
to pick the cases it runs itself, so the rule travels with the task — with the durations of
that group only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from distcheck.suites.base import CaseId, CaseInfo, GroupInfo, UsageError

COSTLY = 1000  # a cost hint (slow mode: input elements) from which a case goes alone
COSTLY_SECONDS = 1.0  # a recorded duration from which a case goes alone
SECONDS_PER_COST = 1e-3  # a cost hint's rough weight in seconds, to order it among recorded cases


@dataclass(frozen=True)
class CostlyRule:
    """``weight(case)``: the expected seconds of a case that goes alone, None for the others.
    ``min_cost`` None: cost hints make no case costly (fast mode)."""

    min_cost: int | None = COSTLY
    min_seconds: float = COSTLY_SECONDS
    durations: Mapping[str, float] = field(default_factory=dict)

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
        return sum(self._groups.get(group.key, {}).values())

    def rule(self, base: CostlyRule, group: GroupInfo | None = None) -> CostlyRule:
        """``base`` with the durations of ``group`` (of every group if None)."""
        if group is not None:
            return CostlyRule(base.min_cost, base.min_seconds, self._groups.get(group.key, {}))
        merged = {key: value for group_seconds in self._groups.values() for key, value in group_seconds.items()}
        return CostlyRule(base.min_cost, base.min_seconds, merged)


def load_durations(path: str) -> Durations:
    """Durations from a JSON report (``{"cases": [{"id", "seconds"}, ...]}``), a run folder holding
    ``report.json``, or a JSON object ``{case id: seconds}``. Raises :class:`UsageError` (one
    line) for anything else."""
    if os.path.isdir(path):
        path = os.path.join(path, "report.json")
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as e:
        raise UsageError(f"--durations: cannot read {path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise UsageError(f"--durations: {path} is not JSON ({e.msg}, line {e.lineno})") from None
    if isinstance(data, dict) and isinstance(data.get("cases"), list):
        seconds = {c["id"]: c["seconds"] for c in data["cases"] if isinstance(c, dict) and "id" in c and "seconds" in c}
    elif isinstance(data, dict) and all(isinstance(v, (int, float)) for v in data.values()):
        seconds = data
    else:
        raise UsageError(f"--durations: {path} is neither a distcheck report nor a {{case id: seconds}} object")
    return Durations(seconds)
