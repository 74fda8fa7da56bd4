"""How long cases take: recorded durations (``--durations FILE``, a previous run's report),
indexed by group (an op in a dtype). The policy (:mod:`.default_policy`) orders work by them: a
worker that lists a group gets the durations of that group only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from distcheck.storage import location
from distcheck.suites.base import CaseId, GroupInfo, UsageError


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

    def seconds_of(self, group: GroupInfo | None = None) -> dict[str, float]:
        """The recorded seconds of ``group``'s cases (of every group if None)."""
        if group is not None:
            return self._groups.get(group.key, {})
        return {key: value for group_seconds in self._groups.values() for key, value in group_seconds.items()}


def _json(path: str):
    try:
        return json.loads(location.read_text(path))
    except location.StoreError as e:
        raise UsageError(f"--durations: {e}") from None
    except json.JSONDecodeError as e:
        raise UsageError(f"--durations: {path} is not JSON ({e.msg}, line {e.lineno})") from None


def load_durations(path: str) -> Durations:
    """Durations from a JSON report (``{"cases": [{"id", "seconds"}, ...]}``), a run folder holding
    ``report.json``, or a JSON object ``{case id: seconds}``, each a path or a store's URL.
    Raises :class:`UsageError` (one line) for anything else."""
    if location.is_folder(path):
        path = location.join(path, "report.json")
    data = _json(path)
    if isinstance(data, dict) and isinstance(data.get("cases"), list):
        seconds = {c["id"]: c["seconds"] for c in data["cases"] if isinstance(c, dict) and "id" in c and "seconds" in c}
    elif isinstance(data, dict) and all(isinstance(v, (int, float)) for v in data.values()):
        seconds = data
    else:
        raise UsageError(f"--durations: {path} is neither a distcheck report nor a {{case id: seconds}} object")
    return Durations(seconds)
