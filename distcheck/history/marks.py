"""The history as of one run, for the reports of that run (``distcheck run|report|compare
--history STORE``): the store's runs up to the run's night, with the run itself, and how each of
its failures is worded: ``new``, ``failing since NIGHT`` or ``flaky (k of the last n nights)``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from distcheck.history.cases import History, Thresholds
from distcheck.history.night_run import NightRun, from_loaded
from distcheck.history.store import HistoryStore, NoHistoryStore
from distcheck.history.table import Scope, build
from distcheck.kinds import BAD_VERDICTS, Verdict
from distcheck.reports.load import LoadedRun

DEFAULTS = Thresholds()


@dataclass
class RunHistory:
    """``history`` as of the run; ``note``: what became of the run in the store (one line)."""

    history: History
    note: str

    def marks(self, records: Iterable) -> dict[str, str]:
        """The wording of each failing or flaky record's case: ``{case id: mark}``."""
        column = {case: k for k, case in enumerate(self.history.ids)}
        found = {}
        for record in records:
            if record.verdict in BAD_VERDICTS or record.verdict == Verdict.FLAKY:
                mark = self.history.mark(column[record.id]) if record.id in column else None
                if mark is not None:
                    found[record.id] = mark
        return found


def run_history(url: str, run: LoadedRun, add: bool, thresholds: Thresholds = DEFAULTS) -> RunHistory:
    """The history of ``run``'s suites and mode up to its night, from the store at ``url``
    (``add``: the run is stored first if it is finished; a store is started if there is none).
    An unfinished run is not stored, and counts as its night's run here only."""
    night_run = from_loaded(run, require_finished=False)
    finished = run.info.get("complete") is True
    try:
        store = HistoryStore(url, create=add and finished)
    except NoHistoryStore:
        if not add:
            raise
        store = None  # an unfinished first run: its history is itself
    if store is not None and add and finished:
        note = "added to" if store.add([night_run])[0] else "already in"
        note = f"history: the run is {note} {url}"
    elif add:
        note = f"history: the run is not finished: not added to {url}"
    else:
        note = ""
    return RunHistory(_as_of(store, night_run, thresholds), note)


def _as_of(store: HistoryStore | None, run: NightRun, thresholds: Thresholds) -> History:
    header = run.header
    scope = Scope(mode=header.mode, suites=header.suites, until=header.night)
    return History(build(store, scope, [run]), thresholds)
