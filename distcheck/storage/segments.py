"""Where a run's records are written (:func:`open_records`) — appended to a local file, or as
segments where files cannot be appended to — and any run folder's records read back
(:func:`read_lines`).

A local run folder keeps its records in one file, ``records.jsonl``, a line appended and flushed
as each arrives (:class:`AppendedFile`: a driver killed with SIGKILL loses at most the line it was
writing). An object store (S3, GCS) has no append: an object is written whole or not at
all. There the records go in segments, ``records/part-000001.jsonl``, ``part-000002.jsonl``, ...:
:class:`SegmentWriter` gathers lines in memory and writes them as one new part every
``seconds`` (or sooner, once ``records`` records wait), from a thread of its own, so that a slow
store never holds up the driver. A driver killed with SIGKILL loses the records that were not
in a part yet, at most ``seconds`` worth: a resume runs those cases again. A resumed run writes
parts numbered after the last one there.

Reading a folder back (:func:`read_lines`) joins ``records.jsonl``, if there is one (a folder
written locally, perhaps copied to a store since), and then the parts in number order.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from distcheck.storage import location

RECORDS = "records.jsonl"
PARTS = "records"  # the folder of a run's parts
_PART = re.compile(r"part-(\d+)\.jsonl")
SECONDS_VARIABLE, RECORDS_VARIABLE = "DISTCHECK_SEGMENT_SECONDS", "DISTCHECK_SEGMENT_RECORDS"
DEFAULT_SECONDS, DEFAULT_RECORDS = 5.0, 10_000


@dataclass(frozen=True)
class Line:
    """A line of a run's records: where it is (its file in the folder, its line number), its text, and whether
    it may have been cut short (the last line of an appended file: a driver killed while
    writing it)."""

    where: str
    number: int
    text: str
    may_be_cut: bool


def part_name(number: int) -> str:
    return f"part-{number:06d}.jsonl"


def part_numbers(folder: str) -> list[int]:
    """The numbers of the parts in ``folder``, in order."""
    found = (_PART.fullmatch(name) for name in location.names(location.join(folder, PARTS)))
    return sorted(int(match.group(1)) for match in found if match)


def has_records(folder: str) -> bool:
    return location.exists(location.join(folder, RECORDS)) or bool(part_numbers(folder))


def read_lines(folder: str) -> Iterator[Line]:
    """The non-blank lines of the records in ``folder``: ``records.jsonl``'s, then each part's."""
    sources = [(RECORDS, True)] if location.exists(location.join(folder, RECORDS)) else []
    sources += [(f"{PARTS}/{part_name(n)}", False) for n in part_numbers(folder)]
    for where, is_appended in sources:
        lines = location.read_text(location.join(folder, *where.split("/"))).splitlines()
        last = len(lines) - 1
        for k, text in enumerate(lines):
            if text.strip():
                yield Line(where, k + 1, text, is_appended and k == last)


def open_records(folder: str) -> AppendedFile | SegmentWriter:
    """The writer of the run's lines in ``folder`` (a path or URL): its ``records.jsonl``
    appended to, or, in an object store, parts. Both take ``write(text, records)`` and ``close()``."""
    return SegmentWriter(folder) if location.is_url(folder) else AppendedFile(folder)


class AppendedFile:
    """``records.jsonl`` of a local folder (made if need be), appended to and flushed at each write."""

    def __init__(self, folder: str):
        path = location.local_path(folder)
        os.makedirs(path, exist_ok=True)
        self._file = open(os.path.join(path, RECORDS), "a", buffering=1, encoding="utf-8")  # a flush per line

    def write(self, text: str, records: int = 1) -> None:
        self._file.write(text + "\n")

    def close(self) -> None:
        self._file.close()


def _setting(name: str, default: float) -> float:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if value <= 0:
        raise location.StoreError(f"${name} must be a positive number, not {text!r}")
    return value


class SegmentWriter:
    """Writes lines to ``folder`` as parts: a part every ``seconds`` (default
    ``$DISTCHECK_SEGMENT_SECONDS``, else 5) while lines wait, or as soon as ``records`` records
    (default ``$DISTCHECK_SEGMENT_RECORDS``, else 10,000) wait. :meth:`write` only queues;
    :meth:`close` writes what still waits, and raises :class:`~location.StoreError` if it
    cannot. A part that fails to be written is tried again with the next one (its lines first)."""

    def __init__(self, folder: str, seconds: float | None = None, records: int | None = None):
        self.folder = folder
        self.seconds = seconds if seconds is not None else _setting(SECONDS_VARIABLE, DEFAULT_SECONDS)
        self.records = records if records is not None else int(_setting(RECORDS_VARIABLE, DEFAULT_RECORDS))
        self.parts_written = 0
        self._next = (part_numbers(folder) or [0])[-1] + 1
        self._waiting: list[str] = []
        self._count = 0
        self._since = 0.0  # when the oldest waiting line came
        self._closed = False
        self._warned = False
        self._changed = threading.Condition()
        self._upload = threading.Lock()  # one part at a time, in number order
        self._thread = threading.Thread(target=self._flush_loop, name="distcheck-segments", daemon=True)
        self._thread.start()

    def write(self, text: str, records: int = 1) -> None:
        """Queue ``text`` (one line or several, without the final newline) holding ``records`` records."""
        with self._changed:
            if self._closed:
                raise location.StoreError(f"the records of {self.folder} are closed")
            first = not self._waiting
            if first:
                self._since = time.monotonic()
            self._waiting.append(text)
            self._count += records
            if first or self._count >= self.records:  # a part is due at a new time
                self._changed.notify()

    def _due(self) -> float | None:
        """Seconds until the waiting lines are due (0: now); None when none wait."""
        if not self._waiting:
            return None
        if self._count >= self.records:
            return 0.0
        return max(0.0, self._since + self.seconds - time.monotonic())

    def _flush_loop(self) -> None:
        while True:
            with self._changed:
                due = self._due()
                while not self._closed and (due is None or due > 0):
                    self._changed.wait(due)
                    due = self._due()
                if self._closed:
                    return  # close writes what waits
                lines, count = self._take()
            try:
                self._put(lines)
            except location.StoreError as e:
                self._warn(e)
                with self._changed:
                    self._waiting[:0] = lines
                    self._count += count
                    self._changed.wait(self.seconds)  # the store failed: not again at once

    def _take(self) -> tuple[list[str], int]:
        lines, count = self._waiting, self._count
        self._waiting, self._count = [], 0
        return lines, count

    def _put(self, lines: list[str]) -> None:
        with self._upload:
            target = location.join(self.folder, PARTS, part_name(self._next))
            location.write_text(target, "\n".join(lines) + "\n")
            self._next += 1
            self.parts_written += 1

    def _warn(self, error: location.StoreError) -> None:
        if not self._warned:
            self._warned = True
            print(f"distcheck: warning: {error}; trying again", file=sys.stderr)

    def close(self) -> None:
        """Write the lines still waiting, as one last part, and stop."""
        with self._changed:
            if self._closed:
                return
            self._closed = True
            self._changed.notify()
        self._thread.join()
        lines, _ = self._take()
        if lines:
            self._put(lines)
