"""What a case's nights say: its failure streak, last pass, flaky rate, slowdown, the library
versions that changed, and how a report words it."""

from __future__ import annotations

import numpy as np
import pytest

from distcheck.history.cases import History, Thresholds, _median
from distcheck.history.night_run import from_loaded
from distcheck.history.table import Scope, build
from distcheck.reports.load import LoadedRun
from tests.history.runs import VERSIONS, night, records, started

VERDICTS = {"P": "pass", "F": "fail", "E": "error", "T": "timeout", "~": "flaky", "s": "skipped", "x": "xfail"}
VERDICTS["X"] = "xpass"


def nightly(patterns: dict[str, str], seconds: dict[str, list[float]] | None = None, versions=None):
    """The night runs of ``patterns``: per op a letter a night ('-': the op not in that run)."""
    runs = []
    for n in range(len(next(iter(patterns.values())))):
        verdicts = {op: VERDICTS[p[n]] for op, p in patterns.items() if p[n] != "-"}
        times = {op: s[n] for op, s in (seconds or {}).items()}
        info = {"started": started(n), "mode": "fast", "complete": True, "versions": (versions or {}).get(n, VERSIONS)}
        runs.append(from_loaded(LoadedRun(f"run{n}", info, records(verdicts, times))))
    return runs


def history(patterns, seconds=None, versions=None, **thresholds) -> tuple[History, dict[str, int]]:
    found = History(build(None, Scope(), nightly(patterns, seconds, versions)), Thresholds(**thresholds))
    return found, {case.split("::")[1]: k for k, case in enumerate(found.ids)}


def test_the_failure_streak_since_its_first_night_and_the_last_pass():
    h, c = history({"broke": "PPPFFF", "never": "FFFFFF", "fixed": "FFFPPP", "steady": "PPPPPP"})
    assert h.night(h.first_failing[c["broke"]]) == night(3) and h.night(h.last_passing[c["broke"]]) == night(2)
    assert h.night(h.first_failing[c["never"]]) == night(0) and h.last_passing[c["never"]] == -1
    assert h.first_failing[c["fixed"]] == -1 and h.night(h.last_passing[c["fixed"]]) == night(5)
    assert h.first_failing[c["steady"]] == -1
    assert h.case(c["broke"])["verdicts"] == ["pass"] * 3 + ["fail"] * 3


def test_nights_not_run_or_skipped_do_not_break_a_streak_a_flaky_night_does():
    h, c = history({"gap": "PFF-sE", "flaky": "PF~FFT", "xfail": "PxFFFF"})
    assert h.night(h.first_failing[c["gap"]]) == night(1)
    assert h.night(h.first_failing[c["flaky"]]) == night(3)
    assert h.night(h.last_passing[c["xfail"]]) == night(1)  # an expected failure is not a failure


def test_the_flaky_rate_counts_flaky_and_flipped_nights():
    h, c = history({"flips": "PFPFPF", "broke": "PPPFFF", "flaky": "PP~PPP", "steady": "PPPPPP", "mixed": "P~FPsP"})
    rates = {op: h.case(k)["flaky_rate"] for op, k in c.items()}
    expected = {"flips": 5 / 6, "broke": 1 / 6, "flaky": 1 / 6, "steady": 0.0, "mixed": 3 / 5}
    assert rates == {op: round(rate, 4) for op, rate in expected.items()}
    assert h.flaky[c["flips"]] and h.flaky[c["mixed"]]
    assert not h.flaky[c["broke"]] and not h.flaky[c["flaky"]]  # once is not flaky


def test_flaky_counts_only_the_last_nights_of_its_window():
    h, c = history({"old": "PFPFPPPPPP"}, window=5)
    assert h.case(c["old"])["flaky_nights"] == [0, 5] and not h.flaky[c["old"]]
    h, c = history({"old": "PFPFPPPPPP"}, window=10)
    assert h.case(c["old"])["flaky_nights"] == [4, 10] and h.flaky[c["old"]]


def test_marks_say_new_failing_since_and_flaky():
    h, c = history({"new": "PPPPPF", "since": "PPPFFF", "flaky": "PFPFPF", "fine": "PPPPPP"})
    assert h.mark(c["new"]) == "new"
    assert h.mark(c["since"]) == f"failing since {night(3)}"
    assert h.mark(c["flaky"]) == "flaky (5 of the last 6 nights)"
    assert h.mark(c["fine"]) is None


def test_slower_against_the_median_over_a_factor_and_a_second():
    seconds = {
        "slowed": [0.1, 0.1, 0.12, 0.1, 0.1, 2.0],
        "drift": [1.0, 1.2, 1.4, 1.6, 1.8, 2.7],
        "fast": [0.01, 0.01, 0.01, 0.01, 0.01, 0.9],  # 90× but less than a second more
        "steady": [3.0] * 6,
    }
    h, c = history({op: "PPPPPP" for op in seconds}, seconds)
    assert {op for op, k in c.items() if h.slower[k]} == {"slowed"}
    found = h.case(c["slowed"])
    assert found["median_seconds"] == pytest.approx(0.1) and found["last_seconds"] == pytest.approx(2.0)
    assert h.slowdown(c["slowed"]) == pytest.approx(20.0)
    h, c = history({op: "PPPPPP" for op in seconds}, seconds, slower=1.5)
    assert {op for op, k in c.items() if h.slower[k]} == {"slowed", "drift"}


def test_slower_is_every_case_a_full_median_would_find():
    rng = np.random.default_rng(0)
    nights, cases = 40, 3000
    times = rng.lognormal(0.0, 1.0, size=(nights, cases)).astype(np.float32)
    times[-1, rng.integers(0, cases, 200)] *= 8
    letters = np.where(rng.random((nights, cases)) < 0.1, "-", "P")
    letters[-1] = "P"
    patterns = {f"op{k}": "".join(letters[:, k]) for k in range(cases)}
    seconds = {f"op{k}": times[:, k].tolist() for k in range(cases)}
    h, c = history(patterns, seconds)
    columns = np.array([c[f"op{k}"] for k in range(cases)])
    ran = letters != "-"
    median = _median(times, ran)
    last = times[-1]
    expected = (last > 2.0 * median) & (last - median > 1.0)
    assert expected.sum() > 50
    assert np.array_equal(h.slower[columns], expected)


def test_the_versions_that_changed_between_the_last_pass_and_the_first_failure():
    engines = {"tensorplay": "1.0.0"}
    versions = {n: {**VERSIONS, "torch": "2.12.0" if n < 3 else "2.13.0", "engines": engines} for n in range(6)}
    versions[4]["python"] = "3.12.4"  # after the streak began: not between
    h, c = history({"broke": "PPPFFF", "steady": "PPPPPP"}, versions=versions)
    assert h.version_changes(c["broke"]) == {"torch": ["2.12.0", "2.13.0"]}
    assert h.case(c["broke"])["versions_changed"] == {"torch": ["2.12.0", "2.13.0"]}
    assert h.version_changes(c["steady"]) == {}


def test_a_removed_case_is_not_failing_and_its_new_name_starts_late():
    h, c = history({"old_name": "PPFF--", "new_name": "----FF"})
    assert h.case(c["old_name"])["latest"] is None and not h.failing[c["old_name"]]
    assert h.case(c["new_name"])["verdicts"] == [None] * 4 + ["fail"] * 2
    assert h.night(h.first_failing[c["new_name"]]) == night(4) and h.mark(c["new_name"]) == f"failing since {night(4)}"


def test_an_empty_history():
    h = History(build(None, Scope()))
    assert h.nights == [] and h.ids == [] and h.select().size == 0 and h.select(every=True).size == 0


def test_choosing_cases_by_their_latest_verdict():
    h, c = history({"a": "PPF", "b": "PPE", "c": "PPP", "d": "PPs", "e": "FFP"})
    chosen = lambda *v: {h.ids[k].split("::")[1] for k in h.select(v)}  # noqa: E731
    assert chosen("failing") == {"a", "b"} and chosen("pass", "skipped") == {"c", "d", "e"}
    assert {h.ids[k].split("::")[1] for k in h.select()} == {"a", "b"}  # failing, flaky or slower
    assert len(h.select(every=True)) == 5
