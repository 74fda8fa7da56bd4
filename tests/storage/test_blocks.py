"""Failure blocks: bounded where the case runs, named by its record, stored by the driver, read back."""

from __future__ import annotations

import numpy as np
import pytest

from distcheck.case.run import Outcome, recorded, to_record
from distcheck.runner import RunOptions, run_suite
from distcheck.storage import blocks as artifacts
from distcheck.suites import CaseInfo, Selection
from tests.reports.runs import blocks, case
from tests.runner.fake_suite import FakeSuite


def test_small_blocks_are_kept_whole_and_read_back(tmp_path):
    made = blocks(complex_=True)
    kept = artifacts.bounded(made)
    assert kept.shape == (6, 5) and (kept.row0, kept.col0) == (0, 0) and kept.worst == (2, 3)
    name = artifacts.file_name("torch-opinfo::mm::complex128::sample0::grad")
    artifacts.BlockStore(str(tmp_path)).write(name, artifacts.encoded(kept))
    again = artifacts.load(str(tmp_path / name))
    np.testing.assert_array_equal(again.window.numerical, made.numerical)
    np.testing.assert_array_equal(again.window.analytical, made.analytical)
    assert again.window.part is None and again.window.mode == "backward"
    assert (again.window.atol, again.window.rtol, again.worst, again.shape) == (1e-5, 1e-3, (2, 3), (6, 5))


@pytest.mark.parametrize(("rows", "columns"), [(3000, 2000), (50, 100_000), (100_000, 3)])
def test_large_blocks_keep_a_window_around_the_worst_element_within_a_megabyte(rows, columns):
    numerical = np.zeros((rows, columns))
    analytical = numerical.copy()
    worst = (rows - 2, columns // 3)
    analytical[worst] = 1.0
    kept = artifacts.bounded(artifacts.FailureBlocks(0, 1, numerical, analytical, 1e-5, 1e-3))
    window = kept.window
    assert window.numerical.nbytes + window.analytical.nbytes <= artifacts.MAX_BYTES
    assert window.numerical.nbytes + window.analytical.nbytes > artifacts.MAX_BYTES // 2  # not needlessly small
    assert (window.output_index, window.input_index) == (0, 1)
    height, width = window.numerical.shape
    assert kept.row0 <= worst[0] < kept.row0 + height and kept.col0 <= worst[1] < kept.col0 + width
    assert window.analytical[worst[0] - kept.row0, worst[1] - kept.col0] == 1.0
    assert kept.worst == worst and kept.shape == (rows, columns)


def test_a_record_names_its_blocks_only_in_a_run_that_keeps_them():
    info = CaseInfo(case("sin"))
    kept = artifacts.bounded(blocks())
    outcome = Outcome("fail", "Jacobian mismatch", 0.1, None, None, kept)
    assert recorded(info, outcome, 1, keep_blocks=False) == (to_record(info, outcome, 1), {})
    assert to_record(info, outcome, 1).blocks is None
    record, sent = recorded(info, outcome, 1, keep_blocks=True)
    assert record.blocks == artifacts.file_name(record.id) and list(sent) == [record.blocks]
    assert sent[record.blocks] == artifacts.encoded(kept)  # the file's bytes, made where the case ran
    assert record.to_json()["blocks"] == record.blocks
    assert "blocks" not in to_record(info, Outcome("pass"), 1, keep_blocks=True).to_json()


def test_blocks_that_cannot_be_encoded_cost_the_record_its_blocks_not_its_verdict(monkeypatch):
    import distcheck.case.run as case_module

    def fails(blocks):
        raise MemoryError("no room for the blocks")

    monkeypatch.setattr(case_module, "encoded", fails)
    outcome = Outcome("fail", "Jacobian mismatch", 0.1, None, None, artifacts.bounded(blocks()))
    record, sent = recorded(CaseInfo(case("sin")), outcome, 1, keep_blocks=True)
    assert (record.verdict, record.message, record.blocks, sent) == ("fail", "Jacobian mismatch", None, {})


def test_a_serial_run_stores_the_blocks_of_its_failures_in_its_block_store(tmp_path):
    store = artifacts.BlockStore(str(tmp_path / "blocks"))
    suite = FakeSuite(ops=("sin", "wrong"))
    result = run_suite(suite, Selection(checks=("grad",)), RunOptions(serial=True), blocks=store)
    sin, wrong = result.records
    assert sin.blocks is None and wrong.verdict == "fail" and wrong.blocks == artifacts.file_name(wrong.id)
    assert artifacts.load(str(tmp_path / "blocks" / wrong.blocks)).shape == (4, 4)
    assert [r.blocks for r in run_suite(suite, Selection(checks=("grad",)), RunOptions(serial=True)).records] == [
        None,
        None,
    ]


def test_file_names_are_safe_and_distinct():
    a, b = artifacts.file_name("s::a/b::float64::sample0::grad"), artifacts.file_name("s::a_b::float64::sample0::grad")
    assert a != b and "/" not in a and ":" not in a and a.endswith(".npz")


@pytest.mark.parametrize("shape", [(0, 3), (4, 0), (0, 0)])
def test_empty_blocks_are_kept_as_they_are(tmp_path, shape):
    # a failed comparison of an input or output with no elements (linalg.norm's gradgrad
    # xfail samples): its blocks are kept whole, never a crash of the case that failed
    empty = np.zeros(shape)
    kept = artifacts.bounded(artifacts.FailureBlocks(0, 1, empty, empty.copy(), 1e-5, 1e-3))
    assert kept.shape == shape and (kept.row0, kept.col0) == (0, 0) and kept.worst == (0, 0)
    name = artifacts.file_name("torch-opinfo::linalg.norm::float64::sample32::gradgrad")
    artifacts.BlockStore(str(tmp_path)).write(name, artifacts.encoded(kept))
    assert artifacts.load(str(tmp_path / name)).window.numerical.shape == shape
