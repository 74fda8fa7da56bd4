"""A real run series: a small declared suite (tests/history/series_suite.py) run on six nights,
with a case broken from the fourth night, one failing every other night and one slowed on the
last; the history names the first failing night, the flaky rate and the slowdown. The earlier
nights' start times are moved back a day each (a night is the date a run started); the last
night is a run of today, added by ``distcheck run --history`` itself."""

from __future__ import annotations

import datetime
import json
import os

import pytest

from distcheck.cli import main
from tests.history.series_suite import BROKEN_FROM, SLEEP, SLOWED_FROM

NIGHTS = 6
SUITE = "tests.history.series_suite:suite"


def _case(op: str) -> str:
    return f"series::{op}::float64::sample0::grad"


def _started_on(folder: str, when: datetime.datetime) -> None:
    """The run in ``folder`` as if it had started at ``when``."""
    stamp = when.isoformat(timespec="seconds")
    records = os.path.join(folder, "records.jsonl")
    with open(records) as f:
        start, *rest = f.readlines()
    with open(records, "w") as f:
        f.write(json.dumps({**json.loads(start), "started": stamp}) + "\n" + "".join(rest))
    report = os.path.join(folder, "report.json")
    with open(report) as f:
        data = json.load(f)
    data["summary"]["started"] = stamp
    with open(report, "w") as f:
        json.dump(data, f)


@pytest.mark.slow
def test_a_series_of_nightly_runs(tmp_path, monkeypatch, capsys):
    store, now = str(tmp_path / "history"), datetime.datetime.now(datetime.UTC)
    for n in range(NIGHTS):
        monkeypatch.setenv("HISTORY_NIGHT", str(n))
        folder = str(tmp_path / f"night{n}")
        last = n == NIGHTS - 1
        main(["run", "--suite", SUITE, "--serial", "--out", folder, *(["--history", store] if last else [])])
        if not last:
            _started_on(folder, now - datetime.timedelta(days=NIGHTS - 1 - n))
            assert main(["history", store, folder]) == 0
    out = capsys.readouterr().out
    nights = [(now - datetime.timedelta(days=NIGHTS - 1 - n)).date().isoformat() for n in range(NIGHTS)]
    assert f"FAIL {_case('broken')}" in out and f"[failing since {nights[BROKEN_FROM]}]" in out
    assert f"[flaky ({NIGHTS - 1} of the last {NIGHTS} nights)]" in out  # the run's own summary, marked

    assert main(["history", store, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["nights"] == nights
    cases = data["cases"]
    assert set(cases) == {_case("broken"), _case("flaky"), _case("slowed")}
    broken = cases[_case("broken")]
    assert broken["first_failing"] == nights[BROKEN_FROM] and broken["last_passing"] == nights[BROKEN_FROM - 1]
    assert broken["verdicts"] == ["pass"] * BROKEN_FROM + ["fail"] * (NIGHTS - BROKEN_FROM)
    flaky = cases[_case("flaky")]
    assert flaky["verdicts"] == ["pass", "fail"] * (NIGHTS // 2)
    assert flaky["flaky_rate"] == round((NIGHTS - 1) / NIGHTS, 4) and flaky["mark"].startswith("flaky")
    slowed = cases[_case("slowed")]
    assert slowed["slower"] and slowed["last_seconds"] >= SLEEP > 10 * slowed["median_seconds"]
    assert slowed["verdicts"] == ["pass"] * NIGHTS and SLOWED_FROM == NIGHTS - 1
