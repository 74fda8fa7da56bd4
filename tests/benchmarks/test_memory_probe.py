"""The memory probe of benchmarks/bench_split.py: a piece's growth is its own, cases say their
inputs (through the runner's probe hook)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch

from benchmarks import memory_probe
from distcheck.case import probe
from distcheck.runner import RunOptions, run_suite
from distcheck.runner.split.coordinator import Inbox
from distcheck.suites import Selection
from tests.runner.fake_suite import FakeSuite

MB = 2**20


@pytest.fixture
def hooked(tmp_path, monkeypatch):
    """The runner's probe hook is the memory probe, writing to ``tmp_path``."""
    monkeypatch.setenv(memory_probe.ENV, str(tmp_path))
    monkeypatch.setenv(probe.VARIABLE, memory_probe.SPEC)
    probe.hook.cache_clear()
    yield
    probe.hook.cache_clear()


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


def test_a_run_s_cases_say_their_inputs(tmp_path, hooked):
    result = run_suite(FakeSuite("slow", ops=("sin",)), Selection(checks=("grad",)), RunOptions(serial=True))
    assert [r.verdict for r in result.records] == ["pass"]
    (line,) = memory_probe.read(str(tmp_path))
    assert line["kind"] == "case" and line["what"] == str(result.records[0].case)
    assert line["inputs"] == 4 * 8 and line["peak"] >= line["before"] > 0


def test_the_sampler_s_cheap_figure_is_the_private_memory():
    assert abs(memory_probe._private() - memory_probe._status()["RssAnon"]) < MB


def _samples_over(seconds: float) -> int:
    before = memory_probe._samples
    time.sleep(seconds)
    return memory_probe._samples - before


def _sampling(within: float = 5.0) -> bool:
    """Whether the sampler takes 5 samples within ``within`` seconds (a loaded machine's
    scheduler may hold it back for a while, not for seconds)."""
    before, end = memory_probe._samples, time.monotonic() + within
    while memory_probe._samples - before < 5:
        if time.monotonic() > end:
            return False
        time.sleep(0.005)
    return True


def test_while_every_piece_waits_the_sampler_sleeps_and_the_wait_s_end_is_sampled(tmp_path, monkeypatch):
    monkeypatch.setenv(memory_probe.ENV, str(tmp_path))
    with memory_probe.probe("split case", "waits"):
        assert _sampling()
        with memory_probe.waiting():
            assert _samples_over(0.05) <= 1  # one, at most, that was under way
            held = np.ones(48 * MB // 8)  # not what a wait does: the wait's end sees it all the same
        del held
        time.sleep(0.01)
    (line,) = memory_probe.read(str(tmp_path))
    assert line["private_peak"] - line["private_before"] >= 47 * MB


def test_a_wait_outside_this_thread_s_pieces_pauses_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(memory_probe.ENV, str(tmp_path))
    counted = []

    def waits_elsewhere():
        with memory_probe.waiting():
            counted.append(_sampling())

    with memory_probe.probe("split case", "runs"):
        thread = threading.Thread(target=waits_elsewhere)
        thread.start()
        thread.join()
    assert counted == [True]


def test_a_piece_says_the_cpu_of_its_thread(tmp_path, monkeypatch):
    monkeypatch.setenv(memory_probe.ENV, str(tmp_path))
    with memory_probe.probe("chunk", "spins"):
        end = time.thread_time() + 0.1
        while time.thread_time() < end:
            pass
    with memory_probe.probe("chunk", "sleeps"):
        time.sleep(0.1)
    spins, sleeps = memory_probe.read(str(tmp_path))
    assert spins["cpu"] >= 0.1 and sleeps["cpu"] < 0.05


def test_a_coordinator_waiting_for_a_chunk_s_result_is_not_sampled(tmp_path, hooked):
    inbox = Inbox()
    inbox.begin(0)
    key = inbox.key()
    counted = []

    def delivers_later():
        # counted only while the coordinator is known to be in its wait: the thread's own
        # scheduling before and after the wait (slow on a loaded machine) is not the wait's
        deadline = time.monotonic() + 10
        while memory_probe._waiting == 0 and time.monotonic() < deadline:
            time.sleep(0.001)
        before = memory_probe._samples
        time.sleep(0.05)  # some 50 samples, were a waiting piece sampled
        counted.append(memory_probe._samples - before)
        inbox.deliver(key, ["result"])

    with memory_probe.probe("split case", "coordinator"):
        threading.Thread(target=delivers_later).start()
        assert inbox.wait(key) == ["result"]
    assert counted and counted[0] <= 1  # one under way as the wait began, at most
