"""The memory probe of benchmarks/bench_split.py: a piece's growth is its own, cases say their inputs."""

from __future__ import annotations

import time

import numpy as np
import torch

from distcheck.runner import RunOptions, memory_probe, run_suite
from distcheck.suites import Selection
from tests.runner.fake_suite import FakeSuite

MB = 2**20


def test_off_it_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv(memory_probe.ENV, raising=False)
    with memory_probe.probe("case", "x") as piece:
        piece.inputs = 8
    assert list(tmp_path.iterdir()) == []


def test_a_piece_s_growth_is_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv(memory_probe.ENV, str(tmp_path))
    with memory_probe.probe("case", "big") as piece:
        held = np.ones(48 * MB // 8)  # touched: resident
        piece.inputs = held.nbytes
    del held
    with memory_probe.probe("chunk", "small"):
        small = np.ones(MB // 8)
    del small
    big, little = memory_probe.read(str(tmp_path))
    assert (big["kind"], big["what"], big["inputs"]) == ("case", "big", 48 * MB)
    assert big["peak"] - big["before"] >= 47 * MB
    assert big["private_peak"] - big["private_before"] >= 47 * MB
    # the first piece's peak is not the second's: the mark was reset before it
    assert (little["kind"], little["what"]) == ("chunk", "small")
    assert little["peak"] - little["before"] < 16 * MB
    assert little["private_peak"] - little["private_before"] < 16 * MB
    assert big["pid"] == little["pid"]


def test_a_peak_freed_before_the_piece_ends_is_seen(tmp_path, monkeypatch):
    monkeypatch.setenv(memory_probe.ENV, str(tmp_path))
    with memory_probe.probe("block job", "transient"):
        held = np.ones(48 * MB // 8)
        time.sleep(0.05)  # the sampler's turn
        del held
    (line,) = memory_probe.read(str(tmp_path))
    assert line["private_peak"] - line["private_before"] >= 40 * MB


def test_size_of_counts_each_array_once():
    a, t = np.zeros(10), torch.zeros(3, dtype=torch.float64)
    assert memory_probe.size_of((a, [a, t], {"k": t, "n": 3}, "text", None)) == 80 + 24
    assert memory_probe.size_of(()) == 0


def test_a_run_s_cases_say_their_inputs(tmp_path, monkeypatch):
    monkeypatch.setenv(memory_probe.ENV, str(tmp_path))
    result = run_suite(FakeSuite("slow", ops=("sin",)), Selection(checks=("grad",)), RunOptions(serial=True))
    assert [r.verdict for r in result.records] == ["pass"]
    (line,) = memory_probe.read(str(tmp_path))
    assert line["kind"] == "case" and line["what"] == str(result.records[0].case)
    assert line["inputs"] == 4 * 8 and line["peak"] >= line["before"] > 0
