"""What streaming a run to its folder costs: records.jsonl is written (and flushed) once per case.

(a) the writer alone: microseconds per record (a fast-mode record, message included), on this
    machine's disk;
(b) a real run, fast mode, serial (one process: nothing hides the writer's cost), timed with and
    without the writer, alternately, ``--repeats`` times each: the median wall times and their
    difference;
(c) with ``--store``: the records a second the driver sustains, and this process's CPU a record
    (every thread), writing to a local folder and to an object store — a local S3 server (moto's,
    in a process of its own on 127.0.0.1), the records as segments — alternately, ``--repeats``
    times each, 100,000 records each time (the store's round trips are loopback's, not a cloud's).

    .venv/bin/python benchmarks/bench_run_folder.py                  # ~1 minute
    .venv/bin/python benchmarks/bench_run_folder.py --ops add,mul,sub --repeats 5
    .venv/bin/python benchmarks/bench_run_folder.py --store-only     # (c) alone
    .venv/bin/python benchmarks/bench_run_folder.py --blocks-only    # (d) alone

(d) with ``--blocks``: a failed case's blocks at their bound (a 1 MiB window of two Jacobian
    blocks that differ by noise), per failure: encoding them (where the case ran: the runner,
    a split case's coordinator, a serial run) and storing the encoded file (what the driver
    does), to a local folder and, with ``--store``, to the local S3 server; the median of
    ``--repeats`` rounds of 20 failures each.

Target: the difference is below the run-to-run noise (well under 1 %).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from distcheck.records.case_record import CaseRecord, RecordBatch  # noqa: E402
from distcheck.runner import RunOptions, run_suite  # noqa: E402
from distcheck.storage.run_folder import RunWriter, run_start  # noqa: E402
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


def _record_lines(records: int) -> list[str]:
    """The lines of ``records`` fast-mode records, as the driver writes them."""
    record = CaseRecord(CaseId("torch-opinfo", "nn.functional.conv2d", "float64", "gradgrad", 3), "fail", "x" * 400)
    batch = RecordBatch([CaseRecord(record.case, record.verdict, record.message, k * 1e-3, 1) for k in range(records)])
    return [f'{{"$report_type":"CaseRecord",{body}' for body in batch.bodies]


@contextlib.contextmanager
def local_s3():
    """A local S3 server in a process of its own (its CPU is not the driver's) and a bucket:
    yields the bucket's URL, this process's environment set to reach it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.environ.update(
        AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}",
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
    )
    try:
        import fsspec

        fs = fsspec.filesystem("s3")
        deadline = time.monotonic() + 60
        while True:
            try:
                fs.mkdir("bench-run-folder")
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield "s3://bench-run-folder"
    finally:
        server.terminate()
        server.wait()


def sustained(lines: list[str], folder: str) -> tuple[float, float]:
    """Records a second written to ``folder`` through the writer a run uses (local:
    records.jsonl appended; URL: segments) until all are there, and this process's CPU µs per
    record."""
    from distcheck.storage.segments import open_records

    wall, cpu = time.perf_counter(), time.process_time()
    writer = open_records(folder)
    for line in lines:
        writer.write(line)
    writer.close()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return len(lines) / wall, cpu / len(lines) * 1e6


def store_cost(repeats: int, records: int = 100_000) -> None:
    lines = _record_lines(records)
    local, store = [], []
    with local_s3() as bucket:
        for k in range(repeats):
            with tempfile.TemporaryDirectory() as folder:
                local.append(sustained(lines, folder))
            store.append(sustained(lines, f"{bucket}/run-{k}"))
    for name, figures in (("a local folder", local), ("the local S3 server", store)):
        rate = statistics.median(f[0] for f in figures)
        cpu = statistics.median(f[1] for f in figures)
        print(f"(c) {name}: {rate:,.0f} records/s sustained, {cpu:.1f} µs of this process's CPU a record")


def blocks_cost(repeats: int, s3: bool, failures: int = 20) -> None:
    from distcheck.storage.blocks import MAX_BYTES, BlockStore, FailureBlocks, bounded, encoded

    rng = np.random.default_rng(0)
    side = int((MAX_BYTES // 16) ** 0.5)  # two float64 blocks of side × side fill the bound
    analytical = rng.standard_normal((side, side))
    numerical = analytical + 1e-3 * rng.standard_normal((side, side))
    kept = bounded(FailureBlocks(0, 0, numerical, analytical, 1e-5, 1e-3))
    places = {"a local folder": None}
    with local_s3() if s3 else contextlib.nullcontext() as bucket:
        if bucket:
            places["the local S3 server"] = bucket
        encode, stores = [], {name: [] for name in places}
        for k in range(repeats):
            start = time.perf_counter()
            files = [encoded(kept) for _ in range(failures)]
            encode.append((time.perf_counter() - start) / failures)
            for name, where in places.items():
                with tempfile.TemporaryDirectory() as folder:
                    store = BlockStore(f"{where or folder}/blocks-{k}")
                    start = time.perf_counter()
                    for j, data in enumerate(files):
                        store.write(f"case-{j}.npz", data)
                    stores[name].append((time.perf_counter() - start) / failures)
    print(f"(d) a failure's blocks ({len(files[0]) / 2**20:.2f} MiB encoded), median of {repeats}:")
    print(f"    encoding, where the case ran: {1000 * statistics.median(encode):.1f} ms")
    for name, times in stores.items():
        print(f"    storing, on the driver, to {name}: {1000 * statistics.median(times):.1f} ms")


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
    parser.add_argument("--store", action="store_true", help="also (c): a local folder against an object store")
    parser.add_argument("--store-only", action="store_true", help="(c) alone")
    parser.add_argument("--blocks", action="store_true", help="also (d): a failure's blocks, encoded and stored")
    parser.add_argument("--blocks-only", action="store_true", help="(d) alone (with --store: also to S3)")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    if args.blocks or args.blocks_only:
        blocks_cost(args.repeats, s3=args.store or args.store_only)
    if args.blocks_only:
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        return
    if args.store or args.store_only:
        store_cost(args.repeats)
    if args.store_only:
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        return
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
