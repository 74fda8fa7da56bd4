"""bench_vectorize_parity.py's comparison of a batched run with a --no-vectorize one."""

from __future__ import annotations

import distcheck.suites
from benchmarks.bench_vectorize_parity import compare
from distcheck.cli import main
from distcheck.storage.run_folder import RECORDS
from tests.runner.fake_cli import SUITES

RUN = ["run", "--suite", "fake", "--mode", "slow", "--ops", "sin,wrong", "--checks", "grad", "--serial"]


def test_the_verdicts_of_both_runs_compared_and_the_fallbacks_said(monkeypatch, tmp_path, capsys):
    for name, where in SUITES.items():
        monkeypatch.setitem(distcheck.suites._SUITES, name, where)
    assert main([*RUN, "--out", str(tmp_path / "batched")]) == 1  # wrong fails
    assert main([*RUN, "--no-vectorize", "--out", str(tmp_path / "exact")]) == 1
    capsys.readouterr()
    assert compare(str(tmp_path), {"batched": 1.0, "exact": 2.0}) == 0
    out = capsys.readouterr().out
    assert "2 cases (pass 1, fail 1); verdicts differ on 0" in out
    assert "slow-mode comparisons: 0 batched, 2 element by element: " in out  # sin: small; wrong: small or failure
    records = tmp_path / "exact" / RECORDS
    records.write_text(records.read_text().replace('"verdict":"fail"', '"verdict":"error"'))
    assert compare(str(tmp_path), {"batched": 1.0, "exact": 2.0}) == 1
    assert "fake::wrong::float64::sample0::grad: batched fail, exact error" in capsys.readouterr().out
