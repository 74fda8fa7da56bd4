"""Console reports: a progress line while a suite runs, a summary when it ends.

The progress goes to stderr: on a terminal one line redrawn in place, otherwise (CI logs,
pipes) a plain line every ``interval`` seconds. The summary goes to stdout: a table of
verdicts per check kind, the slowest cases, the failures with the first lines of their
messages (an error's with the last lines of its traceback) and a command that reruns just that
case, the flaky cases with their attempts, and, for an interrupted run, the command that
resumes it.
"""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Mapping
from typing import TextIO

from distcheck.records.case_record import BAD, CaseRecord, RecordBatch
from distcheck.records.listener import Listener
from distcheck.records.record_list import RecordList
from distcheck.records.result import RunResult
from distcheck.reports import repro

BAR_WIDTH = 24
MESSAGE_LINES = 6  # of each failure's message
TRACEBACK_SHOWN = 6  # lines of the end of an error's traceback
SHOWN_FAILURES = 30
SHOWN_SLOWEST = 10


def duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m{rest % 60:02d}s" if hours else f"{rest // 60}m{rest % 60:02d}s"


class ConsoleProgress(Listener):
    """Draws a run's progress on ``stream``."""

    def __init__(self, stream: TextIO | None = None, interval: float | None = None, tty: bool | None = None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.interval = interval if interval is not None else (0.2 if self.tty else 15.0)
        self.total, self.complete, self.done, self.bad = 0, False, 0, 0
        self.start = time.monotonic()
        self._last_draw = 0.0
        self._width = 0

    def started(self, result: RunResult) -> None:
        self.start = time.monotonic()
        device = "" if result.device == "cpu" else f"; device {result.device}"
        placed = f": {result.placement}" if result.placement else ""
        self.stream.write(
            f"distcheck: suite {result.suite} ({result.mode} mode) on {result.executor}, {result.workers} worker(s)"
            f"{device}{placed}\n"
        )
        self.stream.flush()

    def enumerated(self, cases: int, complete: bool) -> None:
        self.total, self.complete = cases, complete

    def recorded(self, batch: RecordBatch) -> None:
        self.done += len(batch)
        self.bad += len(batch.bad)
        now = time.monotonic()
        if now - self._last_draw >= self.interval:
            self._last_draw = now
            self._draw(now)

    def finished(self, result: RunResult) -> None:
        self._draw(time.monotonic())
        if self.tty:
            self.stream.write("\n")
        self.stream.flush()

    def line(self, now: float) -> str:
        elapsed = now - self.start
        total = f"{self.total}" if self.complete else f"{self.total}+"
        rate = self.done / elapsed if elapsed > 0 else 0.0
        if self.complete and rate > 0:
            eta = duration((self.total - self.done) / rate)
        else:
            eta = "?"
        fraction = self.done / self.total if self.total else 0.0
        filled = int(BAR_WIDTH * fraction)
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        return (
            f"[{bar}] {self.done}/{total} cases, {self.bad} failed, {rate:.1f}/s, "
            f"elapsed {duration(elapsed)}, ETA {eta}"
        )

    def _draw(self, now: float) -> None:
        text = self.line(now)
        if self.tty:
            self.stream.write("\r" + text.ljust(self._width))
            self._width = len(text)
        else:
            self.stream.write(f"progress: {text}\n")
        self.stream.flush()


def reproduce_command(record: CaseRecord, mode: str, spec: str | None = None) -> str:
    """A command that reruns just this case, in this process; ``spec``: what ``--suite`` took to
    load its suite (None: the suite's name)."""
    case = record.case
    words = ["distcheck", "run", "--suite", spec or case.suite, "--ops", case.op, "--dtypes", case.dtype]
    words += ["--checks", case.check, "-k", str(case), "--serial"]
    if case.device is not None:
        words += ["--device", case.device]
    if mode != "fast":
        words += ["--mode", mode]
    return " ".join(shlex.quote(w) for w in words)


def _marked(record: CaseRecord, marks: Mapping[str, str]) -> str:
    """What the history says of a failing case (new, failing since NIGHT, flaky), if known."""
    mark = marks.get(record.id)
    return f" [{mark}]" if mark else ""


def _traceback(record: CaseRecord) -> list[str]:
    """The end of the record's traceback (an error's), indented under its message: its last
    lines from the start of a frame, without the lines that only point (``^^^``)."""
    if not record.traceback:
        return []
    lines = [line for line in record.traceback.splitlines() if line.strip(" ^~")]
    end = lines[-TRACEBACK_SHOWN:]
    while len(end) > 1 and not end[0].startswith("  File "):
        end = end[1:]
    shown = f" (its end, of {len(record.traceback.splitlines())} lines in the record)" if end != lines else ""
    return [f"      traceback{shown}:", *(f"        {text}" for text in end)]


def _flaky(flaky: list[CaseRecord], mode: str, marks: Mapping[str, str], spec: str | None) -> list[str]:
    if not flaky:
        return []
    lines = ["", f"Flaky ({len(flaky)}): failed, then passed when run again"]
    for r in flaky[:SHOWN_FAILURES]:
        attempts = ", ".join(a["verdict"] for a in r.attempts or ())
        lines.append(f"  FLAKY {r.id} (attempts: {attempts}){_marked(r, marks)}")
        lines.append(f"      rerun: {reproduce_command(r, mode, spec)}")
    return lines


def _disabled(result: RunResult, records: RecordList) -> list[str]:
    """The count of cases skipped as PyTorch's disabled tests (torch-opinfo runs)."""
    if result.suite != "torch-opinfo":
        return []
    from distcheck.suites.torch_opinfo.disabled import disabled_count

    count = disabled_count(records)
    return [f"{count} disabled: skipped as PyTorch's disabled tests (--disabled-tests)"] if count else []


def resume_command(folder: str) -> str:
    return f"distcheck run --resume {shlex.quote(str(folder))}"


def summary(
    result: RunResult,
    strict_flaky: bool = False,
    folder: str | None = None,
    marks: Mapping[str, str] | None = None,
    spec: str | None = None,
) -> str:
    """The end-of-run report: verdicts per check kind, slowest cases, failures, flaky cases;
    for an interrupted run (recorded in ``folder``), how to resume it. With ``strict_flaky``
    a flaky case fails the run. ``marks``: what the history says of the failing cases, by id
    (``--history``: new, failing since NIGHT, flaky (k of the last n nights)). ``spec``: what
    ``--suite`` took to load the suite (None: its name), for the commands that rerun and
    reproduce a case."""
    marks = marks or {}
    lines = [
        f"{result.suite} ({result.mode} mode) on {result.executor} with {result.workers} worker(s): "
        f"{len(result.records)} cases in {result.seconds:.1f} s",
        "",
    ]
    tally = result.tally()
    verdicts = list(tally.counts())  # flaky too, in a run that has some
    header = ["check", *verdicts, "total"]
    rows = [header]
    for check in [*tally.checks, None]:
        counts = tally.counts(check)
        rows.append([check or "total", *(str(counts[v]) for v in verdicts), str(sum(counts.values()))])
    widths = [max(len(row[k]) for row in rows) for k in range(len(header))]
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [cell.rjust(w) for cell, w in zip(row[1:], widths[1:])]
        lines.append("  ".join(cells))
    records = RecordList.of(result.records)  # read by columns: no record made but those shown
    lines += _disabled(result, records)
    counts = records.batch_counts()
    if counts:
        lines.append(f"slow-mode comparisons: {counts.describe()}")
    slowest = records.slowest(SHOWN_SLOWEST)  # ties in run order
    if slowest:
        lines += ["", "Slowest cases:"]
        for r in slowest:
            lines.append(f"  {r.seconds:8.2f} s  {r.tasks:5d} task(s)  {r.verdict:7s}  {r.id}")
    bad = records.having(BAD)
    if bad:
        lines += ["", f"Failures ({len(bad)}):"]
        for r in bad[:SHOWN_FAILURES]:
            lines.append(f"  {r.verdict.upper()} {r.id} ({r.seconds:.2f} s){_marked(r, marks)}")
            message = r.message.strip().splitlines() or ["(no message)"]
            lines += [f"      {text}" for text in message[:MESSAGE_LINES]]
            if len(message) > MESSAGE_LINES:
                lines.append(f"      ... ({len(message) - MESSAGE_LINES} more lines)")
            lines += _traceback(r)
            lines.append(f"      rerun: {reproduce_command(r, result.mode, spec)}")
            if r.case.sample is not None:
                lines.append(f"      repro: {repro.command(r, result.mode, spec)}")
        if len(bad) > SHOWN_FAILURES:
            lines.append(f"  ... and {len(bad) - SHOWN_FAILURES} more (all of them are in the --json report)")
    flaky = result.flaky
    lines += _flaky(flaky, result.mode, marks, spec)
    if not result.complete:
        why = f"interrupted ({result.interrupted})" if result.interrupted else "stopped"
        lines += ["", f"INCOMPLETE: {why} with {len(result.records)} cases recorded"]
        if folder is not None:
            lines.append(f"resume it: {resume_command(folder)}")
    unexpected = result.unexpected_passes
    if unexpected:
        lines += ["", f"Unexpected successes ({len(unexpected)} tests expected to fail whose cases all passed):"]
        lines += [f"  XPASS {test}" for test in unexpected[:SHOWN_FAILURES]]
        if len(unexpected) > SHOWN_FAILURES:
            lines.append(f"  ... and {len(unexpected) - SHOWN_FAILURES} more (all of them are in the --json report)")
    failed = tally.failed or bool(unexpected) or (strict_flaky and bool(flaky))
    lines += ["", "FAILED" if failed else "OK" if result.complete else "INCOMPLETE"]
    return "\n".join(lines)
