"""Runs made up for report tests: records of every verdict, and a run folder with failure blocks."""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np

from distcheck.records.case_record import CaseRecord
from distcheck.reduce.failure_blocks import FailureBlocks
from distcheck.storage import blocks as artifacts
from distcheck.suites import CaseId

MISMATCH = (
    "Jacobian mismatch for output 0 with respect to input 0,\nnumerical:tensor([[1.]])\nanalytical:tensor([[2.]])\n"
)


def case(op: str, check: str = "grad", sample: int | None = 0, dtype: str = "float64", suite: str = "torch-opinfo"):
    return CaseId(suite, op, dtype, check, sample)


def blocks(rows: int = 6, columns: int = 5, complex_: bool = False, seed: int = 0) -> FailureBlocks:
    """A numerical block and an analytical one that differs in a few elements, most at (2, 3)."""
    rng = np.random.default_rng(seed)
    numerical = rng.standard_normal((rows, columns))
    if complex_:
        numerical = numerical + 1j * rng.standard_normal((rows, columns))
    analytical = numerical.copy()
    analytical[min(2, rows - 1), min(3, columns - 1)] += 5.0
    analytical[0, 0] += 0.5
    return FailureBlocks(0, 0, numerical, analytical, 1e-5, 1e-3)


def records() -> list[CaseRecord]:
    return [
        CaseRecord(case("add"), "pass", "", 0.01, 1),
        CaseRecord(case("add", "gradgrad"), "pass", "", 2.5, 1),
        CaseRecord(case("sin", sample=3), "fail", MISMATCH, 0.2, 1),
        CaseRecord(case("sin", "gradgrad", sample=3), "error", "gradgradcheck raised RuntimeError: boom\nmore", 0.1, 1),
        CaseRecord(case("cos", "gradgrad"), "timeout", "stopped after 600 s (--timeout)", 600.0, 1),
        CaseRecord(case("cov", sample=None), "xfail", "OpInfo marks it <expected>", 0.0, 0),
        CaseRecord(case("grid_sampler_3d", "fwgrad", sample=None), "skipped", "Skipped! 23 TB & more", 0.0, 0),
        CaseRecord(case("mm", dtype="complex128"), "fail", "While considering the imaginary part " + MISMATCH, 0.3, 1),
    ]


def run_folder(path, records_: list[CaseRecord] | None = None, *, report: bool = True, mode: str = "fast") -> str:
    """A run folder at ``path``: blocks of the failing cases in ``blocks/``, the records in
    ``records.jsonl`` and (``report``) ``report.json``."""
    records_ = list(records() if records_ is None else records_)
    folder = str(path)
    store, kept = artifacts.BlockStore(os.path.join(folder, "blocks")), []
    for k, r in enumerate(records_):
        name = None
        if r.verdict == "fail":
            made = blocks(complex_=r.case.dtype == "complex128", seed=k)
            name = artifacts.file_name(r.id)
            store.write(name, artifacts.encoded(artifacts.bounded(made)))
        kept.append(dataclasses.replace(r, blocks=name))
    info = {"suite": "torch-opinfo", "mode": mode, "executor": "serial", "workers": 1, "command": ["distcheck", "run"]}
    with open(os.path.join(folder, "records.jsonl"), "w") as f:
        f.write(json.dumps({"$report_type": "RunStart", **info}) + "\n")
        for r in kept:
            f.write(json.dumps({"$report_type": "CaseRecord", **r.to_json()}) + "\n")
        f.write(json.dumps({"$report_type": "RunFinish", "seconds": 603.1}) + "\n")
    if report:
        with open(os.path.join(folder, "report.json"), "w") as f:
            json.dump({"summary": {**info, "seconds": 603.1}, "cases": [r.to_json() for r in kept]}, f)
    return folder


def write_report(path, records_: list[CaseRecord], suite: str = "torch-opinfo", mode: str = "fast", **summary) -> str:
    """A JSON report of ``records_`` at ``path``; ``summary``: more of its summary (``selection``...)."""
    with open(path, "w") as f:
        info = {"suite": suite, "mode": mode, **summary}
        json.dump({"summary": info, "cases": [r.to_json() for r in records_]}, f)
    return str(path)
