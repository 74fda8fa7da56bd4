"""A run's ``vectorize`` (``distcheck run --no-vectorize``): down to every case's checks, serial
and on Ray; recorded in the run folder, so that a resume keeps it; the same verdicts either way."""

from __future__ import annotations

import distcheck.suites
from distcheck.cli import main
from distcheck.runner import RunOptions, run_suite
from distcheck.runner.store import RECORDS, read_run
from distcheck.suites import Selection
from tests.runner.fake_cli import SUITES
from tests.runner.fake_suite import FakeSuite

GRAD = Selection(checks=("grad",))
OPS = ("sin", "big", "wrong")  # big: 3,000 elements, batched; wrong: a failure, judged element by element


def _verdicts(result) -> dict[str, str]:
    return {record.id: record.verdict for record in result.records}


def test_without_batches_the_verdicts_are_the_same():
    suite = FakeSuite("slow", ops=OPS)
    batched = run_suite(suite, GRAD, RunOptions(serial=True))
    exact = run_suite(suite, GRAD, RunOptions(serial=True, vectorize=False))
    assert _verdicts(batched) == _verdicts(exact)
    assert list(_verdicts(exact).values()) == ["pass", "pass", "fail"]


def test_the_run_folder_records_it_and_a_resume_keeps_it(monkeypatch, tmp_path, capsys):
    for name, where in SUITES.items():
        monkeypatch.setitem(distcheck.suites._SUITES, name, where)
    run = ["run", "--suite", "fake", "--mode", "slow", "--ops", "sin", "--checks", "grad", "--serial"]
    assert main([*run, "--no-vectorize", "--out", str(tmp_path / "exact")]) == 0
    assert main([*run, "--out", str(tmp_path / "batched")]) == 0
    assert read_run(tmp_path / "exact").options(serial=True).vectorize is False
    assert read_run(tmp_path / "batched").options(serial=True).vectorize is True
    lines = (tmp_path / "exact" / RECORDS).read_text().splitlines()
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / RECORDS).write_text(lines[0] + "\n")  # killed before its first record
    capsys.readouterr()
    assert main(["run", "--resume", str(tmp_path / "cut")]) == 0
    assert read_run(tmp_path / "cut").options(serial=True).vectorize is False
