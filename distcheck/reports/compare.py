"""``distcheck compare OLD NEW``: what changed between two runs (last night's and tonight's).

Groups, each with its case ids and the first line of their messages: new failures (a case not
failing in OLD — or not in OLD at all: an added case — that fails, errors, times out or is flaky
in NEW), fixed, still failing, newly flaky, added and removed cases, and cases that got much
slower (over :data:`SLOWER_FACTOR` × and over :data:`SLOWER_SECONDS` s). Before the groups, what
differs in what the two runs ran (suite, mode, device, selection) or how far they got (an
incomplete run): added and removed cases then say little about the code. Text for a terminal,
markdown to paste into an issue, JSON for tools. With the history (``--history STORE``), each
failing case of NEW says whether it is new, failing since a night, or flaky (``history``: the
words of :mod:`distcheck.history.marks`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from distcheck.records.case_record import BAD, FLAKY, XPASS, CaseRecord
from distcheck.reports.load import LoadedRun

FAILING = (*BAD, FLAKY)
SLOWER_FACTOR, SLOWER_SECONDS = 2.0, 1.0
FAIL_ON = ("new", "any", "none")
FORMATS = ("text", "markdown", "json")
SHOWN = 200  # cases per group in text and markdown (all of them in JSON)

GROUPS = (
    ("new_failures", "New failures"),
    ("newly_flaky", "Newly flaky"),
    ("newly_xpass", "Newly passing, expected to fail (xpass)"),
    ("still_failing", "Still failing"),
    ("fixed", "Fixed"),
    ("slower", f"Much slower (> {SLOWER_FACTOR:g}× and > {SLOWER_SECONDS:g} s)"),
    ("added", "Added cases"),
    ("removed", "Removed cases"),
)


@dataclass(frozen=True)
class Change:
    """One case in a group: its verdicts and times in both runs (None: not in that run)."""

    id: str
    old: str | None
    new: str | None
    old_seconds: float | None
    new_seconds: float | None
    message: str  # first line of the newer message
    history: str | None = None  # new, failing since NIGHT, flaky (k of the last n nights): with --history

    def to_json(self) -> dict[str, Any]:
        found = dict(self.__dict__)
        if found["history"] is None:
            del found["history"]
        return found


@dataclass
class Comparison:
    old: str
    new: str
    groups: dict[str, list[Change]] = field(default_factory=lambda: {name: [] for name, _ in GROUPS})
    new_failing: int = 0  # failing cases of NEW, all told
    differences: list[str] = field(default_factory=list)  # what the runs ran differently, in words

    def exit_status(self, fail_on: str) -> int:
        if fail_on == "new":
            return 1 if self.groups["new_failures"] else 0
        if fail_on == "any":
            return 1 if self.new_failing else 0
        return 0


def first_line(message: str) -> str:
    return next((line.strip() for line in message.splitlines() if line.strip()), "")


def _change(old: CaseRecord | None, new: CaseRecord | None, marks: Mapping[str, str]) -> Change:
    shown = new if new is not None and new.message else old
    case = (new or old).id
    return Change(
        case,
        None if old is None else old.verdict,
        None if new is None else new.verdict,
        None if old is None else round(old.seconds, 3),
        None if new is None else round(new.seconds, 3),
        first_line(shown.message) if shown is not None else "",
        marks.get(case),
    )


def _group(old: CaseRecord | None, new: CaseRecord | None) -> list[str]:
    """The groups of a case: an added case is new in every way (a failure, flakiness, xpass)."""
    if new is None:
        return ["removed"]
    before = None if old is None else old.verdict
    was, now = before in FAILING, new.verdict in FAILING
    groups = []
    if now and not was:
        groups.append("new_failures")
    if now and was:
        groups.append("still_failing")
    if was and not now:
        groups.append("fixed")
    if new.verdict == FLAKY and before != FLAKY:
        groups.append("newly_flaky")
    if new.verdict == XPASS and before != XPASS:
        groups.append("newly_xpass")
    if old is None:
        groups.append("added")
    elif old.tasks and new.tasks and new.seconds > SLOWER_FACTOR * old.seconds and new.seconds > SLOWER_SECONDS:
        groups.append("slower")
    return groups


def _selection(info: dict[str, Any]) -> dict[str, Any]:
    """A run's recorded selection, each list as a comma-separated text (None: not recorded)."""
    chosen = info.get("selection") or {}
    return {key: ",".join(value) if isinstance(value, list) else value for key, value in chosen.items()}


def differences(old: LoadedRun, new: LoadedRun) -> list[str]:
    """What the two runs ran differently (suite, mode, device, selection) or how far they got,
    in words; a report that does not record one of them is not compared on it."""
    facts = [("suite", old.spec, new.spec), ("mode", old.info.get("mode"), new.info.get("mode"))]
    facts = [(what, was, now) for what, was, now in facts if was is not None and now is not None]
    facts.append(("device", old.info.get("device", "cpu"), new.info.get("device", "cpu")))
    before, after = _selection(old.info), _selection(new.info)
    if before and after:  # a key's None: everything (every op, dtype...)
        facts += [(f"selection {key}", before.get(key), after.get(key)) for key in dict.fromkeys([*before, *after])]
    found = [f"{what}: {_shown(was)} in OLD, {_shown(now)} in NEW" for what, was, now in facts if was != now]
    for name, run in (("OLD", old), ("NEW", new)):
        if run.info.get("complete") is False:
            found.append(f"{name} is incomplete (interrupted): the cases it did not reach are missing from it")
    return found


def _shown(value: Any) -> str:
    return "all" if value is None else str(value)


def compare(old: LoadedRun, new: LoadedRun, marks: Mapping[str, str] | None = None) -> Comparison:
    """The changes from ``old`` to ``new``, case by case (matched by id); ``marks``: what the
    history says of NEW's failing cases, by id."""
    before = {r.id: r for r in old.records}
    after = {r.id: r for r in new.records}
    result = Comparison(old.path, new.path, new_failing=sum(r.verdict in FAILING for r in new.records))
    result.differences = differences(old, new)
    for case in [*after, *(k for k in before if k not in after)]:
        previous, current = before.get(case), after.get(case)
        for group in _group(previous, current):
            result.groups[group].append(_change(previous, current, marks or {}))
    return result


def _verdicts(change: Change) -> str:
    if change.old is None or change.new is None:
        shown = change.new or change.old or ""
    else:
        shown = f"{change.old} → {change.new}"
    return f"{shown}; {change.history}" if change.history else shown


def _times(change: Change) -> str:
    return f"{change.old_seconds:.2f} s → {change.new_seconds:.2f} s"


DIFFERENT = "The runs ran different things; added and removed cases come from that as much as from the code:"


def text(comparison: Comparison) -> str:
    lines = [f"Comparing {comparison.old} (old) with {comparison.new} (new)"]
    if comparison.differences:
        lines += ["", DIFFERENT, *(f"  - {difference}" for difference in comparison.differences)]
    for name, title in GROUPS:
        changes = comparison.groups[name]
        lines += ["", f"{title}: {len(changes)}"]
        for change in changes[:SHOWN]:
            detail = _times(change) if name == "slower" else _verdicts(change)
            lines.append(f"  {change.id}  [{detail}]")
            if change.message and name not in ("fixed", "slower"):
                lines.append(f"      {change.message}")
        if len(changes) > SHOWN:
            lines.append(f"  ... and {len(changes) - SHOWN} more (--format json lists them all)")
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")


def markdown(comparison: Comparison) -> str:
    counts = ", ".join(f"{title.split(' (')[0].lower()}: {len(comparison.groups[n])}" for n, title in GROUPS)
    lines = [f"## distcheck: `{comparison.old}` → `{comparison.new}`", ""]
    if comparison.differences:
        lines += [f"> **{DIFFERENT}**", *(f"> - {_cell(d)}" for d in comparison.differences), ""]
    lines.append(counts)
    for name, title in GROUPS:
        changes = comparison.groups[name]
        if not changes:
            continue
        lines += ["", f"### {title} ({len(changes)})", ""]
        lines += ["| case | verdict | message |", "|---|---|---|"]
        for change in changes[:SHOWN]:
            detail = _times(change) if name == "slower" else _verdicts(change)
            lines.append(f"| `{_cell(change.id)}` | {detail} | {_cell(change.message)} |")
        if len(changes) > SHOWN:
            lines.append(f"\n… and {len(changes) - SHOWN} more (`--format json` lists them all)")
    return "\n".join(lines)


def as_json(comparison: Comparison) -> str:
    data = {
        "old": comparison.old,
        "new": comparison.new,
        "differences": comparison.differences,
        "counts": {name: len(changes) for name, changes in comparison.groups.items()},
        "groups": {name: [c.to_json() for c in changes] for name, changes in comparison.groups.items()},
    }
    return json.dumps(data, indent=1)


def formatted(comparison: Comparison, form: str) -> str:
    return {"text": text, "markdown": markdown, "json": as_json}[form](comparison)
