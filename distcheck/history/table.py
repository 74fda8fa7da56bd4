"""The runs of a history as one table: nights (oldest first) × cases, a verdict code and the
seconds of each (:class:`Table`), read from a store and the runs given besides.

Which runs: those of one mode (the latest run's, unless chosen), of the suites chosen, up to a
night and the last N nights. A night holds one run of each suite: a suite run twice the same
night counts by its later start (the earlier run stays stored, listed in ``runs``)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from distcheck.history.night_run import NightRun, RunHeader, suite_of
from distcheck.history.store import HistoryStore
from distcheck.suites.base import SEPARATOR


@dataclass(frozen=True)
class Scope:
    """What a query reads: ``mode`` (None: the latest run's), ``suites``, ``ops``, ``checks``
    (None: all), ``nights`` (the last N; None: all), ``until`` (the last night read; None: all)."""

    mode: str | None = None
    suites: tuple[str, ...] | None = None
    ops: tuple[str, ...] | None = None
    checks: tuple[str, ...] | None = None
    nights: int | None = None
    until: str | None = None

    @property
    def everything(self) -> bool:
        """No case filter: every case of the runs read."""
        return self.suites is None and self.ops is None and self.checks is None

    def keeps(self, case_id: str) -> bool:
        parts = case_id.split(SEPARATOR)
        return (
            (self.suites is None or parts[0] in self.suites)
            and (self.ops is None or parts[1] in self.ops)
            and (self.checks is None or parts[-1] in self.checks)
        )


@dataclass
class Table:
    """``verdicts[n, c]``: case ``ids[c]``'s verdict code on night ``nights[n]`` (0: absent);
    ``seconds[n, c]`` its time (0 where absent). ``runs[n]``: the runs that make night ``n`` (one
    per suite); ``suites[c]``: case ``c``'s suite; ``current[c]``: the last night a run of its
    suite made."""

    mode: str | None
    nights: list[str]
    runs: list[list[RunHeader]]
    ids: list[str]
    suites: list[str]
    verdicts: np.ndarray
    seconds: np.ndarray
    current: np.ndarray
    superseded: list[RunHeader] = field(default_factory=list)  # runs of a night that a later run replaced


def _chosen(headers: Sequence[RunHeader], scope: Scope) -> tuple[str | None, list[list[RunHeader]], list[RunHeader]]:
    """The mode, the runs of each night read (oldest night first) and the runs superseded."""
    if not headers:
        return scope.mode, [], []
    mode = scope.mode or max(headers, key=lambda h: (h.started, h.key)).mode
    wanted = [
        h
        for h in headers
        if h.mode == mode
        and (scope.suites is None or set(h.suites) & set(scope.suites))
        and (scope.until is None or h.night <= scope.until)
    ]
    latest: dict[str, dict[tuple[str, ...], RunHeader]] = {}  # night -> suites -> its latest run
    for h in sorted(wanted, key=lambda h: (h.started, h.key)):
        latest.setdefault(h.night, {})[h.suites] = h
    kept = {h.key for runs in latest.values() for h in runs.values()}
    superseded = [h for h in wanted if h.key not in kept]
    nights = sorted(latest)
    if scope.nights is not None:
        nights = nights[len(nights) - scope.nights :] if scope.nights else []
    by_night = [[latest[night][suites] for suites in sorted(latest[night])] for night in nights]
    return mode, by_night, superseded


Placement = tuple[slice | np.ndarray, slice | np.ndarray]  # a run's positions kept, and their columns


def _placement(ids: list[str], scope: Scope, columns: dict[str, int]) -> Placement:
    """Where the cases of a list of ids go, new ids taking new columns (slices where they can:
    the usual night's list is the last one's, whole and in order)."""
    keep = range(len(ids)) if scope.everything else [k for k, case in enumerate(ids) if scope.keeps(case)]
    first = len(columns)
    placed = [columns.setdefault(ids[k], len(columns)) for k in keep]
    source = slice(None) if len(keep) == len(ids) else np.array(keep, dtype=np.int64)
    every_new = len(columns) == first + len(placed)
    target = slice(first, len(columns)) if every_new else np.array(placed, dtype=np.int64)
    return source, target


def build(store: HistoryStore | None, scope: Scope, extra: Sequence[NightRun] = ()) -> Table:
    """The table of ``scope`` over the runs in ``store`` and ``extra`` (runs not stored: a run
    being compared, which makes its night for its suites, whatever else ran that night; one
    already stored is read once). Runs are read one after the other into the table, which is
    laid out first from their case-id lists."""
    given = {run.header.key: run for run in extra}
    taken = {(run.header.night, run.header.suites) for run in extra}
    stored = [h for h in (store.headers() if store is not None else []) if (h.night, h.suites) not in taken]
    mode, by_night, superseded = _chosen([*stored, *(r.header for r in extra)], scope)
    headers = [h for night in by_night for h in night]
    columns: dict[str, int] = {}
    placements: dict[str, Placement] = {}  # per case-id list
    for header in reversed(headers):  # the latest night's cases first
        if header.ids not in placements:
            ids = given[header.key].ids if header.key in given else store.ids(header.ids)
            placements[header.ids] = _placement(ids, scope, columns)
    ids = list(columns)
    verdicts = np.zeros((len(by_night), len(ids)), dtype=np.uint8)
    seconds = np.zeros((len(by_night), len(ids)), dtype=np.float32)
    row = {h.key: n for n, night in enumerate(by_night) for h in night}
    to_read = [h for h in headers if h.key not in given]
    read = store.load(to_read) if to_read else ()
    for run in itertools.chain((given[h.key] for h in headers if h.key in given), read):
        source, target = placements[run.header.ids]
        verdicts[row[run.header.key], target] = run.verdicts[source]
        seconds[row[run.header.key], target] = run.seconds[source]
    case_suites = [suite_of(case) for case in ids]
    suites = sorted(set(case_suites))
    last_run = np.full(len(suites), -1, dtype=np.int64)
    for n, night in enumerate(by_night):
        for header in night:
            for suite in set(header.suites) & set(suites):
                last_run[suites.index(suite)] = n
    position = {suite: k for k, suite in enumerate(suites)}
    current = last_run[np.fromiter((position[s] for s in case_suites), dtype=np.int64, count=len(ids))]
    nights = [night[0].night for night in by_night]
    return Table(mode, nights, by_night, ids, case_suites, verdicts, seconds, current, superseded)
