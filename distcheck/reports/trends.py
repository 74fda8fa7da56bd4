"""The trends page of a history: verdict counts night by night (a stacked bar a night), the
failing, flakiest and most slowed cases, each with a sparkline of its nights (a bar a night, as
high as its time against its slowest night, coloured by its verdict). Pictures are inline SVG:
the page, alone (``distcheck history --html``) or a section of a run's HTML report (``--history``),
loads nothing and runs no script."""

from __future__ import annotations

import html
from collections.abc import Iterable

import numpy as np

from distcheck.history.cases import History
from distcheck.history.night_run import ABSENT, VERDICT_NAMES
from distcheck.history.render import night_counts
from distcheck.storage import location

SHOWN = 20  # cases in the flakiest and most slowed tables
SHOWN_FAILING = 100
COLOURS = {
    "pass": "#3a9a50",
    "fail": "#c0152f",
    "error": "#7a0018",
    "timeout": "#e07b00",
    "flaky": "#8a3ccf",
    "xpass": "#e0a800",
    "xfail": "#9a9a9a",
    "skipped": "#c8c8c8",
}
CHART_HEIGHT, SPARK_HEIGHT = 120, 18
STYLE = """
.trends svg{display:block}.trends .chart{border-bottom:1px solid #999;margin:.5em 0}
.trends td.spark{padding:.1em .3em}.legend span{margin-right:1em;font-size:.85em}
.legend i{display:inline-block;width:.8em;height:.8em;margin-right:.3em;vertical-align:middle}
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _bar_width(nights: int, width: int) -> float:
    return max(1.0, width / max(nights, 1))


def chart(history: History, width: int = 720) -> str:
    """Verdict counts night by night: a stacked bar a night, the failing verdicts at the bottom."""
    counts = night_counts(history)
    most = max((sum(c.values()) for c in counts), default=0) or 1
    step = _bar_width(len(counts), width)
    order = ["fail", "error", "timeout", "flaky", "xpass", "pass", "xfail", "skipped"]
    bars = []
    for n, (night, count) in enumerate(zip(history.nights, counts)):
        top = CHART_HEIGHT
        for name in order:
            height = CHART_HEIGHT * count.get(name, 0) / most
            if height <= 0:
                continue
            top -= height
            bars.append(
                f'<rect x="{n * step:.2f}" y="{top:.2f}" width="{step:.2f}" height="{height:.2f}" '
                f'fill="{COLOURS[name]}"><title>{_e(night)}: {count[name]} {name}</title></rect>'
            )
    return (
        f'<svg class="chart" role="img" aria-label="verdicts per night" width="{len(counts) * step:.0f}" '
        f'height="{CHART_HEIGHT}">{"".join(bars)}</svg>'
    )


def sparkline(history: History, case: int, width: int = 240) -> str:
    """A case's nights: a bar a night, as high as its seconds against its slowest night."""
    codes = history.table.verdicts[:, case]
    seconds = history.table.seconds[:, case]
    most = float(seconds.max()) if len(seconds) and seconds.max() > 0 else 1.0
    step = _bar_width(len(codes), width)
    bars = []
    for n, (code, time) in enumerate(zip(codes.tolist(), seconds.tolist())):
        if code == ABSENT:
            continue
        verdict = VERDICT_NAMES[code - 1]
        height = max(2.0, SPARK_HEIGHT * time / most)
        bars.append(
            f'<rect x="{n * step:.2f}" y="{SPARK_HEIGHT - height:.2f}" width="{step:.2f}" height="{height:.2f}" '
            f'fill="{COLOURS[verdict]}"><title>{_e(history.nights[n])}: {verdict}, {time:.2f} s</title></rect>'
        )
    return (
        f'<svg class="spark" role="img" aria-label="{_e(history.ids[case])} night by night" '
        f'width="{len(codes) * step:.0f}" height="{SPARK_HEIGHT}">{"".join(bars)}</svg>'
    )


def _table(history: History, cases: Iterable[int], columns: list[str], cells) -> str:
    rows = "".join(
        f"<tr><td>{_e(history.ids[c])}</td>{cells(c)}<td class='spark'>{sparkline(history, c)}</td></tr>" for c in cases
    )
    head = "".join(f"<th>{_e(name)}</th>" for name in ["case", *columns, "nights"])
    return f"<table><tr>{head}</tr>{rows}</table>" if rows else "<p class='note'>None.</p>"


def _legend() -> str:
    keys = "".join(f"<span><i style='background:{c}'></i>{v}</span>" for v, c in COLOURS.items())
    return f"<p class='legend'>{keys}</p>"


def section(history: History, store: str) -> str:
    """The trends, as a section of a page (``id="trends"``)."""
    nights = history.nights
    if not nights:
        return (
            f"<section id='trends' class='trends'><h2>Trends</h2>"
            f"<p class='note'>No finished runs in {_e(store)} yet.</p></section>"
        )
    failing = sorted(np.flatnonzero(history.failing).tolist(), key=lambda c: history.first_failing[c])
    flakiest = [c for c in np.argsort(-history.flaky_rate, kind="stable").tolist() if history.unstable[c] > 0]
    slowed = sorted(np.flatnonzero(history.slower).tolist(), key=lambda c: -history.slowdown(c))
    return (
        f"<section id='trends' class='trends'><style>{STYLE}</style>"
        f"<h2>Trends: {len(nights)} night(s), {_e(nights[0])} to {_e(nights[-1])}</h2>"
        f"<p class='note'>From the history store {_e(store)}, {history.table.mode} mode.</p>"
        f"{_legend()}<h3>Verdicts per night</h3>{chart(history)}"
        f"<h3>Failing ({len(failing)})</h3>"
        + _table(
            history,
            failing[:SHOWN_FAILING],
            ["since", "last passed"],
            lambda c: (
                f"<td>{_e(nights[history.first_failing[c]])}</td>"
                f"<td>{_e(history.night(history.last_passing[c]) or 'never')}</td>"
            ),
        )
        + "<h3>Flakiest</h3>"
        + _table(
            history,
            flakiest[:SHOWN],
            ["flaky rate", "last nights"],
            lambda c: (
                f"<td class='n'>{history.flaky_rate[c]:.2f}</td>"
                f"<td class='n'>{history.window_unstable[c]} of {history.window_runs[c]}</td>"
            ),
        )
        + "<h3>Most slowed</h3>"
        + _table(
            history,
            slowed[:SHOWN],
            ["last s", "median s", "×"],
            lambda c: (
                f"<td class='n'>{history.last_seconds[c]:.2f}</td>"
                f"<td class='n'>{history.medians([c])[0]:.2f}</td><td class='n'>{history.slowdown(c):.1f}</td>"
            ),
        )
        + "</section>"
    )


def write_file(path: str, history: History, store: str) -> None:
    """The trends page alone, at ``path`` (local or a URL), written whole."""
    from distcheck.reports.html import STYLE as REPORT_STYLE

    title = f"distcheck: the history in {store}"
    location.write_text(
        path,
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
        f"<style>{REPORT_STYLE}</style></head><body><h1>{_e(title)}</h1>{section(history, store)}</body></html>\n",
    )
