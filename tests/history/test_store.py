"""The history store: idempotent adds in any order, immutable objects, the index as a cache of
the listing, and clear errors for what is not a store."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from distcheck.history.night_run import from_loaded, night_of
from distcheck.history.store import INDEX, MARKER, HistoryStore, HistoryStoreError, NoHistoryStore
from distcheck.history.table import Scope, build
from distcheck.reports.load import load_run
from distcheck.suites.base import UsageError
from tests.history.runs import night, run_folder

PATTERNS = {"sin": "PPFF", "cos": "PFPF"}


def _night_runs(tmp_path, nights: int = 4):
    return [
        from_loaded(load_run(run_folder(tmp_path / f"run{n}", n, {op: _verdict(p[n]) for op, p in PATTERNS.items()})))
        for n in range(nights)
    ]


def _verdict(letter: str) -> str:
    return {"P": "pass", "F": "fail"}[letter]


def _files(root) -> dict[str, float]:
    return {
        os.path.relpath(os.path.join(d, f), root): os.path.getmtime(os.path.join(d, f))
        for d, _, files in os.walk(root)
        for f in files
    }


def test_a_new_store_holds_its_marker_its_runs_their_ids_and_an_index(tmp_path):
    store = HistoryStore(str(tmp_path / "history"), create=True)
    assert store.add(_night_runs(tmp_path)) == [True] * 4
    files = sorted(_files(tmp_path / "history"))
    assert files[:2] == [MARKER, "ids/" + files[1][4:]] and files[2] == INDEX
    assert [f for f in files if f.startswith("runs/")] == sorted(f for f in files if f.endswith(".run"))
    assert len([f for f in files if f.endswith(".run")]) == 4 and len([f for f in files if f.startswith("ids/")]) == 1
    assert not [f for f in files if f.endswith(".tmp")]


def test_adding_twice_writes_nothing_again(tmp_path):
    runs = _night_runs(tmp_path)
    store = HistoryStore(str(tmp_path / "history"), create=True)
    store.add(runs)
    before = _files(tmp_path / "history")
    assert HistoryStore(str(tmp_path / "history")).add(runs) == [False] * 4
    assert _files(tmp_path / "history") == before


def test_the_same_run_as_its_folder_and_its_report_is_one_run(tmp_path):
    folder = run_folder(tmp_path / "run", 0, {"sin": "pass"})
    store = HistoryStore(str(tmp_path / "history"), create=True)
    as_report = from_loaded(load_run(os.path.join(folder, "report.json")))
    assert store.add([from_loaded(load_run(folder)), as_report]) == [True, False]
    assert len(store.headers()) == 1


def test_runs_added_out_of_order_read_as_added_in_order(tmp_path):
    runs = _night_runs(tmp_path)
    in_order, shuffled = HistoryStore(str(tmp_path / "a"), create=True), HistoryStore(str(tmp_path / "b"), create=True)
    in_order.add(runs)
    for k in (2, 0, 3, 1, 2):
        shuffled.add([runs[k]])
    first, second = build(in_order, Scope()), build(shuffled, Scope())
    assert first.nights == second.nights == [night(n) for n in range(4)]
    assert first.ids == second.ids
    assert np.array_equal(first.verdicts, second.verdicts) and np.array_equal(first.seconds, second.seconds)


def test_the_index_is_a_cache_of_the_listing(tmp_path):
    runs = _night_runs(tmp_path)
    store = HistoryStore(str(tmp_path / "history"), create=True)
    store.add(runs[:2])
    index = (tmp_path / "history" / INDEX).read_text()
    store.add(runs[2:])
    (tmp_path / "history" / INDEX).write_text(index)  # two adds at once: the later index lacks the other's runs
    assert [h.night for h in HistoryStore(str(tmp_path / "history")).headers()] == [night(n) for n in range(4)]
    os.remove(tmp_path / "history" / INDEX)
    assert len(HistoryStore(str(tmp_path / "history")).headers()) == 4
    HistoryStore(str(tmp_path / "history")).add([])  # an add puts the index back
    assert len(json.loads((tmp_path / "history" / INDEX).read_text())["runs"]) == 4


def test_what_is_not_a_store_is_one_clear_error(tmp_path):
    with pytest.raises(NoHistoryStore, match="no history store at"):
        HistoryStore(str(tmp_path / "nothing"))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("hello")
    with pytest.raises(HistoryStoreError, match="a folder of other things, not a history store"):
        HistoryStore(str(tmp_path / "other"), create=True)
    (tmp_path / "file").write_text("x")
    with pytest.raises(HistoryStoreError, match="is a file, not a history store"):
        HistoryStore(str(tmp_path / "file"), create=True)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / MARKER).write_text("{not json")
    with pytest.raises(HistoryStoreError, match="is not a distcheck history store"):
        HistoryStore(str(tmp_path / "bad"))
    (tmp_path / "bad" / MARKER).write_text(json.dumps({"format": "distcheck-history", "version": 99}))
    with pytest.raises(HistoryStoreError, match="format version 99"):
        HistoryStore(str(tmp_path / "bad"))
    assert isinstance(HistoryStoreError("x"), UsageError)  # the command line's one line, exit status 2


def test_a_damaged_run_object_is_named(tmp_path):
    store = HistoryStore(str(tmp_path / "history"), create=True)
    store.add(_night_runs(tmp_path, 1))
    (run,) = (tmp_path / "history" / "runs").iterdir()
    run.write_bytes(run.read_bytes()[:-7])
    os.remove(tmp_path / "history" / INDEX)
    with pytest.raises(HistoryStoreError, match=f"{run.name} is not a history run object"):
        HistoryStore(str(tmp_path / "history")).headers()
    run.write_bytes(b"something else")
    with pytest.raises(HistoryStoreError, match="is not a history run object"):
        build(HistoryStore(str(tmp_path / "history")), Scope())


def test_an_empty_folder_becomes_a_store(tmp_path):
    (tmp_path / "empty").mkdir()
    HistoryStore(str(tmp_path / "empty"), create=True)
    assert os.listdir(tmp_path / "empty") == [MARKER]


@pytest.mark.parametrize(
    ("started", "night"),
    [
        ("2026-12-07T03:00:00+00:00", "2026-12-07"),
        ("2026-12-07T23:30:00-02:00", "2026-12-08"),  # the UTC date
        ("2026-12-07T01:00:00", "2026-12-07"),  # no zone: UTC
    ],
)
def test_a_night_is_the_utc_date_a_run_started(started, night):
    assert night_of(started) == night


def test_a_bad_start_time_is_a_usage_error():
    with pytest.raises(UsageError, match="bad start time 'yesterday'"):
        night_of("yesterday")
