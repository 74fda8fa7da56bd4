"""Each case's history, read column by column off a :class:`Table` in a few array passes (a
year of the whole nightly is 365 × 100,000 verdicts).

Per case: its verdict on the last night its suite ran (``latest``: None when it did not run
then: removed or renamed); the first night of its current failure streak (failing: fail, error,
timeout; nights it did not run or was skipped do not break a streak, a pass or a flaky night
does); the last night it passed (pass, xfail, xpass); its flaky rate, the share of the nights
it ran that were flaky (a failure that passed when run again) or flipped (passed after failing,
or failed after passing); the median of its seconds on the nights it ran, and its last seconds.
A case is **slower** when its last time is over ``slower`` × its median and over
``slower_seconds`` more; **flaky** when at least two of the last ``window`` nights it ran were
flaky or flipped (a case that broke once flipped once: it is failing, not flaky).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from distcheck.history.night_run import ABSENT, CODES, VERDICT_NAMES, RunHeader
from distcheck.history.table import Table
from distcheck.kinds import BAD_VERDICTS, Verdict

SLOWER, SLOWER_SECONDS, WINDOW = 2.0, 1.0, 14
FLAKY_AT_LEAST = 2  # flaky or flipped nights in the window that make a case flaky
NONE, PASSED, FAILED, FLAKY = 0, 1, 2, 3  # what a night says of a case
_CLASS = np.zeros(256, dtype=np.uint8)
for _verdict in (Verdict.PASS, Verdict.XFAIL, Verdict.XPASS):
    _CLASS[CODES[_verdict]] = PASSED
for _verdict in BAD_VERDICTS:
    _CLASS[CODES[_verdict]] = FAILED
_CLASS[CODES[Verdict.FLAKY]] = FLAKY
VERDICT_CHOICES = ("failing", *VERDICT_NAMES)  # --verdict: failing is any of fail, error, timeout


@dataclass(frozen=True)
class Thresholds:
    slower: float = SLOWER
    slower_seconds: float = SLOWER_SECONDS
    window: int = WINDOW


def _last(mask: np.ndarray) -> np.ndarray:
    """Per column, the last row where ``mask`` holds (-1: none)."""
    rows = mask.shape[0]
    if not rows:
        return np.full(mask.shape[1], -1)
    found = rows - 1 - np.argmax(mask[::-1], axis=0)
    return np.where(mask.any(axis=0), found, -1)


def _first_after(mask: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Per column, the first row after ``after`` where ``mask`` holds (-1: none)."""
    later = mask & (np.arange(mask.shape[0])[:, None] > after[None, :])
    if not mask.shape[0]:
        return np.full(mask.shape[1], -1)
    return np.where(later.any(axis=0), np.argmax(later, axis=0), -1)


def _unstable(kind: np.ndarray) -> np.ndarray:
    """Nights that were flaky, or that passed after the case last failed or failed after it
    last passed (flaky nights between are passed over). The last decided night before each
    night comes from one running maximum of ``4 × night + kind`` over the decided nights."""
    decided = (kind == PASSED) | (kind == FAILED)
    rows = np.arange(kind.shape[0], dtype=np.int16 if kind.shape[0] < 2**13 else np.int32)[:, None]
    seen = np.maximum.accumulate(np.where(decided, rows * 4 + kind, -1), axis=0)
    flipped = np.zeros_like(decided)
    flipped[1:] = decided[1:] & (seen[:-1] >= 0) & ((seen[:-1] & 3) != kind[1:])
    return flipped | (kind == FLAKY)


def _median(seconds: np.ndarray, ran: np.ndarray) -> np.ndarray:
    """Per column, the median of ``seconds`` where ``ran`` (NaN: never ran)."""
    median = np.full(seconds.shape[1], np.nan)
    some = ran.any(axis=0)
    if some.any():
        median[some] = np.nanmedian(np.where(ran[:, some], seconds[:, some], np.nan), axis=0)
    return median


READ = ("streak_start", "last_passing", "runs", "unstable", "window_runs", "window_unstable")  # per case


def _varied(verdicts: np.ndarray, window: int) -> dict[str, np.ndarray]:
    """The columns of cases whose verdict changed (or that did not run every night), read night by night."""
    nights = verdicts.shape[0]
    kind = _CLASS[verdicts]
    streak_start = _first_after(kind == FAILED, _last((kind == PASSED) | (kind == FLAKY)))
    ran, unstable = kind != NONE, _unstable(kind)
    recent = slice(max(0, nights - window), nights)
    return {
        "streak_start": streak_start,
        "last_passing": _last(kind == PASSED),
        "runs": ran.sum(axis=0),
        "unstable": unstable.sum(axis=0),
        "window_runs": ran[recent].sum(axis=0),
        "window_unstable": unstable[recent].sum(axis=0),
    }


def _steady(codes: np.ndarray, nights: int, window: int) -> dict[str, np.ndarray]:
    """The columns of cases with one verdict (``codes``) every night: no night to read."""
    kind = _CLASS[codes]
    every, recent = np.full(len(codes), nights), np.full(len(codes), min(window, nights))
    return {
        "streak_start": np.where(kind == FAILED, 0, -1),
        "last_passing": np.where(kind == PASSED, nights - 1, -1),
        "runs": np.where(kind != NONE, every, 0),
        "unstable": np.where(kind == FLAKY, every, 0),
        "window_runs": np.where(kind != NONE, recent, 0),
        "window_unstable": np.where(kind == FLAKY, recent, 0),
    }


class History:
    """The cases of a table and what their nights say (arrays, one entry per case). Most cases
    have the same verdict every night: only the others' nights are read one by one."""

    def __init__(self, table: Table, thresholds: Thresholds = Thresholds()):
        self.table, self.thresholds = table, thresholds
        verdicts = table.verdicts
        nights, cases = verdicts.shape
        columns = np.arange(cases)
        self.latest = verdicts[table.current, columns] if nights else np.zeros(cases, dtype=np.uint8)
        found = {name: np.zeros(cases, dtype=np.int64) for name in READ}
        if nights:
            varied = verdicts.min(axis=0) != verdicts.max(axis=0)
            for name, values in _varied(verdicts[:, varied], thresholds.window).items():
                found[name][varied] = values
            for name, values in _steady(verdicts[0, ~varied], nights, thresholds.window).items():
                found[name][~varied] = values
        self.first_failing = np.where(_CLASS[self.latest] == FAILED, found["streak_start"], -1)
        self.last_passing = found["last_passing"]
        self.runs, self.unstable = found["runs"], found["unstable"]
        self.window_runs, self.window_unstable = found["window_runs"], found["window_unstable"]
        self.last_seconds = np.where(
            _CLASS[self.latest] != NONE, table.seconds[table.current, columns] if nights else np.nan, np.nan
        )
        self._medians: dict[int, float] = {}
        self.slower = self._slower()

    @property
    def nights(self) -> list[str]:
        return self.table.nights

    @property
    def ids(self) -> list[str]:
        return self.table.ids

    @cached_property
    def flaky_rate(self) -> np.ndarray:
        return np.divide(self.unstable, self.runs, out=np.zeros(len(self.runs)), where=self.runs > 0)

    @cached_property
    def failing(self) -> np.ndarray:
        return self.first_failing >= 0

    @cached_property
    def flaky(self) -> np.ndarray:
        return self.window_unstable >= FLAKY_AT_LEAST

    def medians(self, columns: np.ndarray | list[int]) -> np.ndarray:
        """The median seconds of these cases (each computed once: a year's medians of every
        case would be most of a query's time)."""
        wanted = np.asarray(columns, dtype=np.int64).tolist()
        todo = sorted({c for c in wanted if c not in self._medians})
        if todo:
            ran = _CLASS[self.table.verdicts[:, todo]] != NONE
            self._medians.update(zip(todo, _median(self.table.seconds[:, todo], ran).tolist()))
        return np.array([self._medians[c] for c in wanted], dtype=float)

    def slowdown(self, case: int) -> float:
        """Its last seconds over its median."""
        median = self.medians([case])[0]
        return float(self.last_seconds[case] / median) if median > 0 else float("inf")

    def _slower(self) -> np.ndarray:
        """Which cases are slower. Their medians are computed only for the cases that can be:
        those with at least half of their nights under the time that would make them slower
        (a median is no higher than its lower middle value; nights a case did not run count as
        under: they make more cases to look at, never fewer)."""
        t = self.thresholds
        with np.errstate(invalid="ignore"):
            bound = np.minimum(self.last_seconds / t.slower, self.last_seconds - t.slower_seconds)
            under = (self.table.seconds < bound.astype(np.float32)).sum(axis=0)
        candidates = np.flatnonzero(~np.isnan(bound) & (self.runs > 0) & (under >= (self.runs + 1) // 2))
        slower = np.zeros(len(self.ids), dtype=bool)
        if candidates.size:
            median, last = self.medians(candidates), self.last_seconds[candidates]
            slower[candidates] = (last > t.slower * median) & (last - median > t.slower_seconds)
        return slower

    def select(self, verdicts: tuple[str, ...] | None = None, every: bool = False) -> np.ndarray:
        """The columns to show: every case, those whose latest verdict is one of ``verdicts``
        (``failing``: fail, error or timeout), or by default those failing, flaky or slower."""
        if every:
            return np.arange(len(self.ids))
        if verdicts:
            codes = [CODES[v] for v in verdicts if v in CODES]
            wanted = np.isin(self.latest, codes) | (("failing" in verdicts) & self.failing)
            return np.flatnonzero(wanted)
        return np.flatnonzero(self.failing | self.flaky | self.slower)

    def night(self, row: int) -> str | None:
        return self.nights[row] if row >= 0 else None

    def run_of(self, row: int, case: int) -> RunHeader | None:
        """The run that made night ``row`` for case ``case``."""
        suite = self.table.suites[case]
        return next((h for h in self.table.runs[row] if suite in h.suites), None) if row >= 0 else None

    def version_changes(self, case: int) -> dict[str, list[str | None]]:
        """The library versions that changed between the last night the case passed and the
        first night of its current failure streak: ``{"torch": ["2.12.0", "2.13.0"]}``."""
        before, after = self.run_of(self.last_passing[case], case), self.run_of(self.first_failing[case], case)
        if before is None or after is None:
            return {}
        return changed(before, after)

    def mark(self, case: int) -> str | None:
        """How a report words a failing case: ``flaky (k of the last n nights)``, ``failing
        since NIGHT`` or ``new`` (None: it is not failing now)."""
        if self.flaky[case]:
            return f"flaky ({self.window_unstable[case]} of the last {self.window_runs[case]} nights)"
        if not self.failing[case]:
            return None
        since = self.first_failing[case]
        return "new" if since == self.table.current[case] else f"failing since {self.nights[since]}"

    def case(self, case: int) -> dict[str, Any]:
        """One case's history as the JSON output has it."""
        codes = self.table.verdicts[:, case]
        return {
            "verdicts": [VERDICT_NAMES[c - 1] if c != ABSENT else None for c in codes.tolist()],
            "latest": VERDICT_NAMES[self.latest[case] - 1] if self.latest[case] != ABSENT else None,
            "first_failing": self.night(self.first_failing[case]),
            "last_passing": self.night(self.last_passing[case]),
            "versions_changed": self.version_changes(case),
            "flaky_rate": round(float(self.flaky_rate[case]), 4),
            "flaky_nights": [int(self.window_unstable[case]), int(self.window_runs[case])],
            "median_seconds": _number(self.medians([case])[0]),
            "last_seconds": _number(self.last_seconds[case]),
            "slower": bool(self.slower[case]),
            "mark": self.mark(case),
        }


def _number(value: float) -> float | None:
    return None if np.isnan(value) else round(float(value), 4)


def changed(before: RunHeader, after: RunHeader) -> dict[str, list[str | None]]:
    """The library versions that differ between two runs: ``{name: [before, after]}``."""
    old, new = before.library_versions(), after.library_versions()
    return {k: [old.get(k), new.get(k)] for k in sorted({*old, *new}) if old.get(k) != new.get(k)}
