"""What streaming a run to its folder costs: records.jsonl is written (and flushed) once per case.

(a) the writer alone: microseconds per record (a fast-mode record, message included), on this
    machine's disk;
(b) a real run, fast mode, serial (one process: nothing hides the writer's cost), timed with and
    without the writer, alternately, ``--repeats`` times each: the median wall times and their
    difference.

    .venv/bin/python benchmarks/bench_run_folder.py                  # ~1 minute
    .venv/bin/python benchmarks/bench_run_folder.py --ops add,mul,sub --repeats 5

Target: the difference is below the run-to-run noise (well under 1 %).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from distcheck.runner import RunOptions, run_suite  # noqa: E402
from distcheck.runner.records import CaseRecord, RecordBatch  # noqa: E402
from distcheck.runner.store import RunWriter, run_start  # noqa: E402
from distcheck.suites import Selection, get_suite  # noqa: E402
from distcheck.suites.base import CaseId  # noqa: E402


def writer_alone(records: int) -> float:
    """Microseconds per record written."""
    record = CaseRecord(CaseId("torch-opinfo", "nn.functional.conv2d", "float64", "gradgrad", 3), "fail", "x" * 400)
    with tempfile.TemporaryDirectory() as folder:
        writer = RunWriter(folder, {"$report_type": "RunStart"})
        start = time.perf_counter()
        for k in range(records):
            writer.recorded(RecordBatch([CaseRecord(record.case, record.verdict, record.message, k * 1e-3, 1)]))
        seconds = time.perf_counter() - start
        writer.close()
    return seconds / records * 1e6


def timed_run(selection: Selection, folder: str | None) -> tuple[float, int]:
    suite, options = get_suite("torch-opinfo"), RunOptions(serial=True)
    writer = None if folder is None else RunWriter(folder, run_start("torch-opinfo", "fast", selection, options, []))
    start = time.perf_counter()
    result = run_suite(suite, selection, options, writer)
    return time.perf_counter() - start, len(result.records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", default="add,mul,sub,cdist,linalg.det,nn.functional.conv2d", help="op names")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print(f"(a) writer alone: {writer_alone(20000):.1f} µs per record")
    selection = Selection(checks=("grad", "gradgrad"), ops=tuple(args.ops.split(",")), dtypes=("float64",))
    timed_run(selection, None)  # warm: op_db, samples, torch's first calls
    plain, written = [], []
    for _ in range(args.repeats):
        seconds, cases = timed_run(selection, None)
        plain.append(seconds)
        with tempfile.TemporaryDirectory() as folder:
            written.append(timed_run(selection, folder)[0])
    a, b = statistics.median(plain), statistics.median(written)
    print(f"(b) {cases} cases, serial, fast mode, median of {args.repeats}:")
    print(f"    without the run folder {a:.2f} s, with it {b:.2f} s: {100 * (b - a) / a:+.1f} %")
    print(f"    run-to-run spread without it: {min(plain):.2f}–{max(plain):.2f} s")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
