"""The history store: a folder of immutable objects, on a local disk or in an object store
(``s3://bucket/nightly-history``: any URL :mod:`distcheck.storage` reads and writes), with no
server and no locking.

    STORE/distcheck-history.json     what the folder is: {"format": "distcheck-history", "version": 1}
    STORE/runs/<started>-<key>.run   one per run added: its header and columns (verdict codes, seconds)
    STORE/ids/<digest>.txt.gz        a list of case ids, shared by every run of the same cases
    STORE/index.json                 the runs' headers, to choose runs without reading them

An object is written whole, once, and never changed (object stores have no append; on a local
disk a write goes to a temporary file renamed into place). Adding a run writes its case ids
(unless stored), its run object, then the index. The listing of ``runs/`` is the truth, the
index a cache of it, rewritten whole after adding: a run missing from it (two adds at once,
a writer stopped before the index) is read from its own object, and written back to the index
by the next add. A run already stored (by key) is not written again: adding is idempotent.

A run object is a line naming the format, a line of JSON (the run's header), then its verdict
codes (one byte a case, zlib-compressed: mostly passes, they compress a hundredfold) and its
seconds (float32, little-endian, as they are: times do not compress, and a query reads them
without decompressing). A query fetches its run objects several at a time (an object store
answers each request in tens of milliseconds: a year is 365 of them).
"""

from __future__ import annotations

import datetime
import gzip
import json
import zlib
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from distcheck.history.night_run import VERDICT_NAMES, NightRun, RunHeader, code_table
from distcheck.storage import location
from distcheck.storage.location import StoreError

MARKER, INDEX, RUNS, IDS = "distcheck-history.json", "index.json", "runs", "ids"
FORMAT = {"format": "distcheck-history", "version": 1}
READ_AT_ONCE = 32  # run objects fetched at once
RUN_SUFFIX, RUN_MAGIC = ".run", b"distcheck-history-run 1\n"


class HistoryStoreError(StoreError):
    """A history store that cannot be used (not one, another format's, a damaged object): one
    line, exit status 2."""


class NoHistoryStore(HistoryStoreError):
    """Nothing at the store's URL yet."""


class HistoryStore:
    """The store at ``url`` (a path or a URL). ``create``: start a store there if there is none
    (adding runs); else a missing store is an error. A store that fails (no such bucket, no
    credentials) is a :class:`~distcheck.storage.location.StoreError`."""

    def __init__(self, url: str, create: bool = False):
        self.url = url
        self._ids: dict[str, list[str]] = {}
        self._open(create)

    def _path(self, *parts: str) -> str:
        return location.join(self.url, *parts)

    def _open(self, create: bool) -> None:
        marker = self._path(MARKER)
        if location.exists(marker):
            try:
                found = json.loads(location.read_text(marker))
            except json.JSONDecodeError:
                found = None
            if not isinstance(found, dict) or found.get("format") != FORMAT["format"]:
                raise HistoryStoreError(f"{self.url} is not a distcheck history store ({MARKER} is not one)")
            if found.get("version") != FORMAT["version"]:
                raise HistoryStoreError(
                    f"{self.url} is a history store of format version {found.get('version')}, "
                    f"this distcheck reads version {FORMAT['version']}"
                )
            return
        if location.is_folder(self.url):
            if location.names(self.url):
                raise HistoryStoreError(f"{self.url} is a folder of other things, not a history store (no {MARKER})")
        elif location.exists(self.url):
            raise HistoryStoreError(f"{self.url} is a file, not a history store (a folder)")
        if not create:
            raise NoHistoryStore(f"no history store at {self.url}: give runs to add to start one")
        location.write_text(marker, json.dumps(FORMAT))

    def _names(self) -> list[str]:
        """The run objects' names, from the listing."""
        return [name for name in location.names(self._path(RUNS)) if name.endswith(RUN_SUFFIX)]

    def _index(self) -> dict[str, dict]:
        path = self._path(INDEX)
        if not location.exists(path):
            return {}
        try:
            return dict(json.loads(location.read_text(path))["runs"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            return {}  # a cache: rebuilt from the run objects

    def headers(self) -> list[RunHeader]:
        """Every stored run's header, oldest start first."""
        names, index = self._names(), self._index()
        missing = [n for n in names if n not in index]
        for name, (header, _) in zip(missing, self._objects(missing)):
            index[name] = header.to_json()
        headers = [RunHeader.from_json(index[n]) for n in names]
        return sorted(headers, key=lambda h: (h.started, h.key))

    @staticmethod
    def object_name(header: RunHeader) -> str:
        stamp = header.started.replace(":", "").replace("-", "")[:15]
        return f"{stamp}-{header.key}{RUN_SUFFIX}"

    def add(self, runs: Iterable[NightRun]) -> list[bool]:
        """Store each run not stored yet, then write the index; for each run, whether it was new."""
        names = set(self._names())
        new = []
        for run in runs:
            name = self.object_name(run.header)
            new.append(name not in names)
            if name in names:
                continue
            ids_path = self._path(IDS, f"{run.header.ids}.txt.gz")
            if not location.exists(ids_path):
                location.write_bytes(ids_path, gzip.compress("\n".join(run.ids).encode(), mtime=0))
            location.write_bytes(self._path(RUNS, name), _encode(run))
            names.add(name)
        if any(new) or not location.exists(self._path(INDEX)):
            index = {self.object_name(h): h.to_json() for h in self.headers()}
            location.write_text(self._path(INDEX), json.dumps({"version": FORMAT["version"], "runs": index}))
        return new

    def _objects(self, names: Sequence[str]) -> Iterator[tuple[RunHeader, dict[str, np.ndarray]]]:
        """The run objects of ``names``, decoded, in that order: fetched :data:`READ_AT_ONCE` at a time."""
        with ThreadPoolExecutor(READ_AT_ONCE) as fetch:
            for start in range(0, len(names), READ_AT_ONCE):
                paths = [self._path(RUNS, n) for n in names[start : start + READ_AT_ONCE]]
                for path, data in zip(paths, list(fetch.map(location.read_bytes, paths))):
                    yield _decode(path, data)

    def load(self, headers: Sequence[RunHeader]) -> Iterator[NightRun]:
        """The stored runs of ``headers``, in that order."""
        names = [self.object_name(h) for h in headers]
        for header, (_, columns) in zip(headers, self._objects(names)):
            yield NightRun(header, self.ids(header.ids), columns["verdicts"], columns["seconds"])

    def ids(self, digest: str) -> list[str]:
        if digest not in self._ids:
            path = self._path(IDS, f"{digest}.txt.gz")
            try:
                text = gzip.decompress(location.read_bytes(path)).decode()
            except (OSError, EOFError, zlib.error, UnicodeDecodeError) as e:
                raise HistoryStoreError(f"{path} is not a list of case ids ({type(e).__name__}: {e})") from None
            self._ids[digest] = text.split("\n") if text else []
        return self._ids[digest]


def _encode(run: NightRun) -> bytes:
    header = {**run.header.to_json(), "added": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}
    verdicts = zlib.compress(run.verdicts.astype(np.uint8).tobytes())
    header["verdict_bytes"] = len(verdicts)
    seconds = run.seconds.astype("<f4").tobytes()
    return b"".join([RUN_MAGIC, json.dumps(header).encode(), b"\n", verdicts, seconds])


def _decode(path: str, data: bytes) -> tuple[RunHeader, dict[str, np.ndarray]]:
    """A run object's header and columns (its verdicts in this version's codes)."""
    if not data.startswith(RUN_MAGIC):
        raise HistoryStoreError(f"{path} is not a history run object (it does not start with {RUN_MAGIC!r})")
    try:
        end = data.index(b"\n", len(RUN_MAGIC))
        fields = json.loads(data[len(RUN_MAGIC) : end])
        header = RunHeader.from_json(fields)
        split = end + 1 + int(fields["verdict_bytes"])
        codes = np.frombuffer(zlib.decompress(data[end + 1 : split]), dtype=np.uint8)
        if header.verdicts != VERDICT_NAMES:
            codes = code_table(header.verdicts)[codes]
        columns = {"verdicts": codes, "seconds": np.frombuffer(data, "<f4", offset=split)}
    except (ValueError, KeyError, TypeError, zlib.error) as e:
        raise HistoryStoreError(f"{path} is not a history run object ({type(e).__name__}: {e})") from None
    if not len(columns["verdicts"]) == len(columns["seconds"]) == header.cases:
        raise HistoryStoreError(f"{path} is not a history run object (its columns have other lengths than its cases)")
    return header, columns
