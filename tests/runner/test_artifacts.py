"""Failure blocks: bounded on the worker, stored by the driver, read back."""

from __future__ import annotations

import numpy as np
import pytest

from distcheck.runner import artifacts
from distcheck.runner.case_runner import Outcome, to_record
from distcheck.suites import CaseInfo
from tests.reports.runs import blocks, case


def test_small_blocks_are_kept_whole_and_read_back(tmp_path):
    made = blocks(complex_=True)
    kept = artifacts.bounded(made)
    assert kept.shape == (6, 5) and (kept.row0, kept.col0) == (0, 0) and kept.worst == (2, 3)
    with artifacts.storing(str(tmp_path)):
        name = artifacts.store("torch-opinfo::mm::complex128::sample0::grad", kept)
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


def test_the_driver_stores_blocks_only_while_a_folder_is_open(tmp_path):
    info = CaseInfo(case("sin"))
    outcome = Outcome("fail", "Jacobian mismatch", 0.1, None, None, artifacts.bounded(blocks()))
    assert to_record(info, outcome, 1).blocks is None
    with artifacts.storing(str(tmp_path / "blocks")):
        record = to_record(info, outcome, 1)
    assert record.blocks == artifacts.file_name(record.id) and (tmp_path / "blocks" / record.blocks).exists()
    assert record.to_json()["blocks"] == record.blocks
    assert "blocks" not in to_record(info, Outcome("pass"), 1).to_json()


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
    with artifacts.storing(str(tmp_path)):
        name = artifacts.store("torch-opinfo::linalg.norm::float64::sample32::gradgrad", kept)
    assert artifacts.load(str(tmp_path / name)).window.numerical.shape == shape
