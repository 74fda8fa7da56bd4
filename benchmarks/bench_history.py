"""The history store at the size of a year of the whole nightly: 100,000 cases × 365 nights.

The benchmark makes a synthetic year — torch-opinfo-like case ids; most cases pass every night,
some are skipped or expected to fail, some break on a night and stay broken, some fail one
night in three or four (flaky), some get several times slower from a night on; every time
varies night to night — stores the first 364 nights (from their columns), then:

(a) adds the last night as `distcheck history STORE RUN` does: a real run folder
    (records.jsonl and report.json of 100,000 cases) read, checked and stored (target ≤ 10 s);
(b) queries the whole history for every failing case: the store read, the table of
    365 × 100,000 verdicts and times, each case's streak, flaky rate and median, and the JSON
    output of the failing cases (target ≤ 5 s);
(c) the store's size (target ≤ 1 GB).

    .venv/bin/python benchmarks/bench_history.py                          # ~3 minutes, ~0.5 GB of scratch
    .venv/bin/python benchmarks/bench_history.py --cases 10000 --nights 30  # a quick look
    .venv/bin/python benchmarks/bench_history.py --s3                     # the store in a local S3 server (moto)

It prints each figure against its target and the load average.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sys
import tempfile
import time

import fsspec
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.bench_run_folder import local_s3  # noqa: E402
from distcheck.history.cases import History  # noqa: E402
from distcheck.history.night_run import CODES, NightRun, RunHeader, from_loaded, ids_digest, night_of, run_key  # noqa: E402
from distcheck.history.render import formatted  # noqa: E402
from distcheck.history.store import HistoryStore  # noqa: E402
from distcheck.history.table import Scope, build  # noqa: E402
from distcheck.records.case_record import CaseRecord  # noqa: E402
from distcheck.records.result import RunResult  # noqa: E402
from distcheck.reports import json_report  # noqa: E402
from distcheck.reports.load import load_run  # noqa: E402
from distcheck.suites.base import CHECK_KINDS, CaseId  # noqa: E402

TARGETS = {"add": 10.0, "query": 5.0, "size": 1.0}  # seconds, seconds, GB
FIRST_NIGHT = datetime.datetime(2026, 1, 1, 3, 0, tzinfo=datetime.UTC)
VERSIONS = {"distcheck": "0.1.0", "torch": "2.13.0", "python": "3.12.3"}


class Year:
    """A synthetic year: each night's verdict codes and seconds, by case, made from one seed."""

    def __init__(self, cases: int, nights: int, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.cases, self.nights = cases, nights
        checks, dtypes = CHECK_KINDS[:4], ("float64", "complex128")
        self.ids = [
            str(CaseId("torch-opinfo", f"op{k // 40:05d}", dtypes[k // 20 % 2], checks[k % 4], k // 4 % 5))
            for k in range(cases)
        ]
        self.base = rng.lognormal(mean=-3.0, sigma=1.5, size=cases).astype(np.float32)  # median ~0.05 s
        self.steady = np.full(cases, CODES["pass"], dtype=np.uint8)
        self.steady[rng.random(cases) < 0.02] = CODES["skipped"]
        self.steady[rng.random(cases) < 0.01] = CODES["xfail"]
        picked = rng.permutation(cases)
        self.broken, self.flaky, self.slowed = picked[:300], picked[300:500], picked[500:550]
        self.base[self.slowed] = np.maximum(self.base[self.slowed], 0.5)  # slowed by more than a second
        self.broken_from = rng.integers(0, nights, size=len(self.broken))
        self.slowed_from = rng.integers(0, nights, size=len(self.slowed))
        self.seed = seed

    def night(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng((self.seed, n))
        verdicts = self.steady.copy()
        verdicts[self.broken[self.broken_from <= n]] = CODES["fail"]
        flaky = self.flaky[rng.random(len(self.flaky)) < 0.3]
        verdicts[flaky] = np.where(rng.random(len(flaky)) < 0.5, CODES["fail"], CODES["flaky"])
        seconds = self.base * rng.uniform(0.9, 1.1, size=self.cases).astype(np.float32)
        seconds[self.slowed[self.slowed_from <= n]] *= 4
        seconds[(verdicts == CODES["skipped"]) | (verdicts == CODES["xfail"])] = 0
        return verdicts, seconds

    def started(self, n: int) -> str:
        return (FIRST_NIGHT + datetime.timedelta(days=n)).isoformat(timespec="seconds")

    def stored_run(self, n: int) -> NightRun:
        verdicts, seconds = self.night(n)
        started = self.started(n)
        counts = {name: int(np.count_nonzero(verdicts == code)) for name, code in CODES.items()}
        header = RunHeader(
            key=run_key(started, "fast", "cpu", ("torch-opinfo",)),
            night=night_of(started),
            started=started,
            mode="fast",
            device="cpu",
            suites=("torch-opinfo",),
            versions=VERSIONS,
            source=f"synthetic night {n}",
            cases=self.cases,
            counts={k: v for k, v in counts.items() if v},
            ids=ids_digest(self.ids),
        )
        return NightRun(header, self.ids, verdicts, seconds)

    def run_folder(self, n: int, folder: str) -> None:
        """Night ``n`` as a finished run folder, written in the run's own formats."""
        verdicts, seconds = self.night(n)
        names = {code: name for name, code in CODES.items()}
        records = [
            CaseRecord(CaseId.parse(i), names[v], "" if names[v] != "fail" else "Jacobian mismatch", float(s), 1)
            for i, v, s in zip(self.ids, verdicts.tolist(), seconds.tolist())
        ]
        start = {"suite": "torch-opinfo", "mode": "fast", "versions": VERSIONS, "started": self.started(n)}
        os.makedirs(folder)
        with open(os.path.join(folder, "records.jsonl"), "w") as f:
            f.write(json.dumps({"$report_type": "RunStart", **start}) + "\n")
            f.write("".join('{"$report_type":"CaseRecord",' + r.json_text[1:] + "\n" for r in records))
            f.write(json.dumps({"$report_type": "RunFinish", "complete": True}) + "\n")
        result = RunResult("torch-opinfo", "fast", "ray", 64, 3600.0, records)
        json_report.write(result, os.path.join(folder, "report.json"), start=start)


def size_of(url: str) -> int:
    """The bytes of every object under ``url`` (a folder or a store's URL)."""
    fs, path = fsspec.core.url_to_fs(url)
    return sum(fs.du(path, total=False).values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--scratch", help="where to make the store and the run folder (default: a temporary folder)")
    parser.add_argument("--s3", action="store_true", help="the store in a local S3 server (moto, its own process)")
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="bench-history-", dir=args.scratch)
    try:
        if args.s3:
            with local_s3() as bucket:
                run(args.cases, args.nights, scratch, f"{bucket}/history")
        else:
            run(args.cases, args.nights, scratch)
    finally:
        shutil.rmtree(scratch)


def run(cases: int, nights: int, scratch: str, store_url: str | None = None) -> None:
    print(f"a synthetic year: {cases:,} cases × {nights} nights; load average {os.getloadavg()[0]:.2f}", flush=True)
    year = Year(cases, nights)
    store_url = store_url or os.path.join(scratch, "history")
    start = time.perf_counter()
    HistoryStore(store_url, create=True).add(year.stored_run(n) for n in range(nights - 1))
    print(f"  the first {nights - 1} nights stored in {time.perf_counter() - start:.1f} s", flush=True)
    folder = os.path.join(scratch, "last-night")
    year.run_folder(nights - 1, folder)

    start = time.perf_counter()
    added = HistoryStore(store_url, create=True).add([from_loaded(load_run(folder))])
    add = time.perf_counter() - start
    assert added == [True]

    start = time.perf_counter()
    history = History(build(HistoryStore(store_url), Scope()))
    failing = history.select(("failing",))
    text = formatted(history, failing, store_url, "json")
    query = time.perf_counter() - start
    found = json.loads(text)
    assert len(found["nights"]) == nights and len(found["cases"]) == len(failing)

    size = size_of(store_url) / 1e9
    print(f"the store: {store_url}")
    print(f"(a) adding one night of {cases:,} cases (a run folder): {add:.2f} s (target ≤ {TARGETS['add']:g} s)")
    print(
        f"(b) the whole history query for every failing case ({len(failing):,} cases, {len(text) / 1e6:.1f} MB of "
        f"JSON): {query:.2f} s (target ≤ {TARGETS['query']:g} s)"
    )
    print(f"(c) the store: {size:.3f} GB (target ≤ {TARGETS['size']:g} GB)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
