"""A history printed: text for a terminal, markdown to paste into an issue, JSON for tools
(``{"nights": [...], "cases": {CASE_ID: {"verdicts": [...], "first_failing": ...}}, ...}``).

Text and markdown show the nights (counts of verdicts, the library versions that changed) and
three groups of the cases chosen: failing (since when, the last pass, what changed between),
flaky (flaky or flipped nights of the last n) and slower (last time against the median), each
case with its verdicts night by night as one character a night."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from distcheck.history.cases import History, changed
from distcheck.history.night_run import ABSENT, VERDICT_NAMES, RunHeader

FORMATS = ("text", "markdown", "json")
SHOWN = 50  # cases per group in text and markdown (all of them in JSON)
SHOWN_NIGHTS = 14  # rows of the nights' table (all of them in JSON)
SPARK = 30  # nights in a case's line of verdicts
LETTERS = {"pass": ".", "fail": "F", "error": "E", "timeout": "T", "flaky": "~", "xfail": "x", "xpass": "X"}
LETTERS["skipped"], ABSENT_LETTER = "s", "-"
LEGEND = "  ".join(f"{letter} {name}" for name, letter in LETTERS.items()) + f"  {ABSENT_LETTER} not run"


def sparkline(history: History, case: int, nights: int = SPARK) -> str:
    """The case's verdicts on its last ``nights`` nights, a character each, oldest first."""
    codes = history.table.verdicts[-nights:, case].tolist()
    return "".join(ABSENT_LETTER if c == ABSENT else LETTERS[VERDICT_NAMES[c - 1]] for c in codes)


def night_counts(history: History) -> list[dict[str, int]]:
    """Per night, the cases of each verdict (of the cases read)."""
    verdicts = history.table.verdicts
    counts = {name: (verdicts == k + 1).sum(axis=1).tolist() for k, name in enumerate(VERDICT_NAMES)}
    return [{name: n[row] for name, n in counts.items() if n[row]} for row in range(len(verdicts))]


def night_changes(history: History) -> list[dict[str, list[str | None]]]:
    """Per night, the library versions that changed since the night before (suite by suite)."""
    found: list[dict[str, list[str | None]]] = []
    previous: dict[tuple[str, ...], RunHeader] = {}
    for runs in history.table.runs:
        changes: dict[str, list[str | None]] = {}
        for run in runs:
            if run.suites in previous:
                changes.update(changed(previous[run.suites], run))
            previous[run.suites] = run
        found.append(changes)
    return found


def _versions(changes: dict[str, list[str | None]]) -> str:
    return ", ".join(f"{name} {old} → {new}" for name, (old, new) in changes.items())


def _title(history: History, url: str) -> str:
    nights, table = history.nights, history.table
    if not nights:
        return f"History in {url}: no finished runs{f' of {table.mode} mode' if table.mode else ''} yet"
    span = nights[0] if len(nights) == 1 else f"{nights[0]} to {nights[-1]}"
    suites = sorted({s for runs in table.runs for run in runs for s in run.suites})
    return (
        f"History in {url}: {len(nights)} night(s) of {table.mode}-mode runs, {span}; "
        f"suites: {', '.join(suites)}; {len(history.ids)} cases"
    )


def groups(history: History, columns: np.ndarray) -> list[tuple[str, list[int]]]:
    """The chosen cases by group: failing (longest streak first), flaky (highest rate first),
    slower (most slowed first), and the others."""
    chosen = columns.tolist()
    failing = sorted((c for c in chosen if history.failing[c]), key=lambda c: (history.first_failing[c], c))
    flaky = sorted(
        (c for c in chosen if history.flaky[c] and not history.failing[c]), key=lambda c: -history.flaky_rate[c]
    )
    slower = sorted((c for c in chosen if history.slower[c]), key=lambda c: -history.slowdown(c))
    shown = {*failing, *flaky, *slower}
    return [
        ("Failing", failing),
        ("Flaky", flaky),
        ("Slower", slower),
        ("Other cases", [c for c in chosen if c not in shown]),
    ]


def describe(history: History, group: str, case: int) -> str:
    """What a group says of a case, in one line."""
    if group == "Failing":
        since = history.first_failing[case]
        count = int(np.count_nonzero(history.table.verdicts[since:, case] != ABSENT))
        last = history.night(history.last_passing[case])
        text = f"failing since {history.nights[since]} ({count} night(s))"
        text += f", last passed {last}" if last else ", never passed"
        if history.flaky[case]:
            text += f"; {_flaky(history, case)}"
        return text
    if group == "Flaky":
        return _flaky(history, case)
    if group == "Slower":
        return (
            f"{history.last_seconds[case]:.2f} s against a median of {history.medians([case])[0]:.2f} s "
            f"({history.slowdown(case):.1f}×)"
        )
    latest = history.latest[case]
    return VERDICT_NAMES[latest - 1] if latest != ABSENT else "not run on its last night (removed or renamed)"


def _flaky(history: History, case: int) -> str:
    return (
        f"flaky or flipped on {history.window_unstable[case]} of the last {history.window_runs[case]} nights "
        f"(flaky rate {history.flaky_rate[case]:.2f})"
    )


def _nights_rows(history: History) -> list[list[str]]:
    counts, changes = night_counts(history), night_changes(history)
    names = [n for n in VERDICT_NAMES if any(n in c for c in counts)]
    rows = [["night", "cases", *names, "versions changed"]]
    for night, count, change in list(zip(history.nights, counts, changes))[-SHOWN_NIGHTS:]:
        rows.append([night, str(sum(count.values())), *(str(count.get(n, 0)) for n in names), _versions(change)])
    return rows


def text(history: History, columns: np.ndarray, url: str) -> str:
    lines = [_title(history, url)]
    if not history.nights:
        return lines[0]
    rows = _nights_rows(history)
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]) - 1)]
    lines.append("")
    for row in rows:
        cells = [row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:-1], widths[1:]))]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    if len(history.nights) > SHOWN_NIGHTS:
        lines.append(f"(the last {SHOWN_NIGHTS} of {len(history.nights)} nights; --format json has them all)")
    lines += ["", f"Verdicts night by night, the last {SPARK} at most, oldest first: {LEGEND}"]
    for group, cases in groups(history, columns):
        if not cases:
            continue
        lines += ["", f"{group} ({len(cases)}):"]
        width = max(len(history.ids[case]) for case in cases[:SHOWN])
        for case in cases[:SHOWN]:
            shown = f"{history.ids[case]:{width}}  {sparkline(history, case)}"
            lines.append(f"  {shown}  {describe(history, group, case)}")
            change = history.version_changes(case) if group == "Failing" else {}
            if change:
                lines.append(f"      changed since it passed: {_versions(change)}")
        if len(cases) > SHOWN:
            lines.append(f"  ... and {len(cases) - SHOWN} more (--format json lists them all)")
    if not columns.size:
        lines += ["", "No case is failing, flaky or slower (--all lists every case)."]
    return "\n".join(lines)


def _cell(value: str) -> str:
    return value.replace("|", "\\|")


def markdown(history: History, columns: np.ndarray, url: str) -> str:
    lines = [f"## {_cell(_title(history, url))}"]
    if not history.nights:
        return lines[0]
    rows = _nights_rows(history)
    lines += ["", "| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows[1:]]
    for group, cases in groups(history, columns):
        if not cases:
            continue
        lines += ["", f"### {group} ({len(cases)})", "", "| case | nights | history |", "|---|---|---|"]
        for case in cases[:SHOWN]:
            detail = describe(history, group, case)
            change = history.version_changes(case) if group == "Failing" else {}
            if change:
                detail += f"; changed since it passed: {_versions(change)}"
            lines.append(f"| `{_cell(history.ids[case])}` | `{sparkline(history, case)}` | {_cell(detail)} |")
        if len(cases) > SHOWN:
            lines.append(f"\n… and {len(cases) - SHOWN} more (`--format json` lists them all)")
    lines += ["", f"Verdicts night by night, oldest first: {LEGEND.replace('  ', ', ')}"]
    return "\n".join(lines)


def as_object(history: History, columns: np.ndarray, url: str) -> dict[str, Any]:
    """The JSON output: ``nights`` (oldest first), ``cases`` (each chosen case's history), and
    per night its runs, verdict counts and library versions changed."""
    counts, changes = night_counts(history), night_changes(history)
    return {
        "store": url,
        "mode": history.table.mode,
        "nights": history.nights,
        "runs": {
            night: [
                {
                    "suites": list(r.suites),
                    "started": r.started,
                    "source": r.source,
                    "cases": r.cases,
                    "versions": r.versions,
                }
                for r in runs
            ]
            for night, runs in zip(history.nights, history.table.runs)
        },
        "counts": dict(zip(history.nights, counts)),
        "versions_changed": dict(zip(history.nights, changes)),
        "cases": _cases(history, columns),
    }


def _cases(history: History, columns: np.ndarray) -> dict[str, dict[str, Any]]:
    history.medians(columns)  # in one pass
    return {history.ids[c]: history.case(c) for c in columns.tolist()}


def as_json(history: History, columns: np.ndarray, url: str) -> str:
    """The JSON object, indented but for a case's history: one line a case (the C encoder's
    speed: an indented dump of a year's failing cases takes seconds)."""
    found = as_object(history, columns, url)
    cases = found.pop("cases")
    head = json.dumps(found, indent=1)[:-2]
    lines = [f"  {json.dumps(case)}: {json.dumps(data)}" for case, data in cases.items()]
    return head + ',\n "cases": {' + ("\n" + ",\n".join(lines) + "\n " if lines else "") + "}\n}"


def formatted(history: History, columns: np.ndarray, url: str, form: str) -> str:
    if form == "json":
        return as_json(history, columns, url)
    return {"text": text, "markdown": markdown}[form](history, columns, url)
