"""The history benchmark at a small size: its synthetic year reads back as it was made, and it
prints its three figures."""

from __future__ import annotations

from benchmarks.bench_history import Year, run
from distcheck.history.cases import History
from distcheck.history.night_run import CODES
from distcheck.history.store import HistoryStore
from distcheck.history.table import Scope, build


def test_the_synthetic_year_reads_back_as_made(tmp_path):
    year = Year(cases=1500, nights=12)
    store = HistoryStore(str(tmp_path / "history"), create=True)
    store.add(year.stored_run(n) for n in range(year.nights))
    history = History(build(store, Scope()))
    column = {case: k for k, case in enumerate(history.ids)}
    for case, since in zip(year.broken.tolist(), year.broken_from.tolist()):
        if case not in year.flaky:
            assert history.first_failing[column[year.ids[case]]] == since
    late = year.slowed_from > year.nights // 2  # slowed on fewer than half of the nights: over the median
    slowed = {column[year.ids[c]] for c in year.slowed[late].tolist()}
    assert slowed and all(history.slower[c] for c in slowed if history.latest[c] == CODES["pass"])


def test_the_benchmark_prints_its_figures(tmp_path, capsys):
    run(cases=800, nights=6, scratch=str(tmp_path))
    out = capsys.readouterr().out
    assert "(a) adding one night of 800 cases" in out and "(target ≤ 10 s)" in out
    assert "(b) the whole history query for every failing case" in out and "(c) the store:" in out
