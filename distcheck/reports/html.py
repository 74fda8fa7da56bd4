"""The HTML report of a run: one self-contained file (styles, script and pictures inline; it
loads nothing from the network).

- the verdicts per check kind, then filters by verdict, check kind, dtype and op (also read
  from the page address: ``report.html#verdict=fail&check=grad&dtype=float64&op=mm``), which
  choose both the failures' cards and the case table's rows;
- first, each failure (fail, error, timeout, flaky): its message (an error's traceback under it,
  folded), its reproducer command and,
  for a Jacobian mismatch whose blocks the run kept, heatmaps of the numerical and analytical
  blocks and of |analytical − numerical| against the tolerance with the largest violation marked;
- then every case in a table, the slowest cases, and the run (time, workers, command, versions).
- with the history (``--history STORE``), its trends across nights (``reports/trends.py``), after
  the failures.

A large run stays usable: the table shows at most :data:`TABLE_ROWS` matching rows at a time;
pictures are drawn for the first :data:`PICTURES_PER_GROUP` failures of each op × check kind ×
dtype, :data:`MAX_PICTURES` in all; failures have a card (message, reproducer) up to
:data:`MAX_CARDS`; every failure's first message line and reproducer are in the table.
"""

from __future__ import annotations

import base64
import html
import io
import json
import platform
from collections import Counter
from typing import TextIO

from distcheck.records.case_record import VERDICTS, CaseRecord
from distcheck.reports import heatmaps, repro
from distcheck.reports.compare import FAILING, first_line
from distcheck.reports.load import LoadedRun
from distcheck.storage import location
from distcheck.storage.blocks import load as load_blocks
from distcheck.suites.base import CHECK_KINDS, CaseId

TABLE_ROWS = 1000
PICTURES_PER_GROUP = 2
MAX_PICTURES = 200
MAX_CARDS = 1000
MESSAGE_LINES, MESSAGE_CHARS = 40, 4000  # of a failure's message on its card
MESSAGE_COLUMN = 200  # characters of the first message line in the table
SLOWEST = 10
TRENDS_LINK = "<p><a href='#trends'>Trends across nights</a> (the history store's runs)</p>"

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:.85em}td,th{border:1px solid #ddd;padding:.2em .5em;text-align:left}
th{background:#f3f3f3}td.n{text-align:right}
.v-pass{color:#17702f}.v-fail,.v-error,.v-timeout,.v-flaky{color:#b00020;font-weight:bold}
.v-skipped,.v-xfail{color:#777}
pre{background:#f7f7f7;padding:.6em;overflow-x:auto;font-size:.8em;max-height:24em}
code{background:#f0f0f0;padding:.1em .3em;font-size:.85em;word-break:break-all}
.failure{border:1px solid #e0b4b4;border-radius:4px;padding:.6em 1em;margin:1em 0}
.note{color:#555;font-size:.85em}
#filters label{margin-right:1em}#banner{background:#fdd;padding:.5em;display:none}
#filters-bar{background:#f7f7f7;border:1px solid #ddd;padding:.5em 1em;margin:1em 0}
img.heatmap{width:100%;max-width:1500px;height:auto}
"""

SCRIPT = r"""
(function(){
  const data = JSON.parse(document.getElementById('case-data').textContent);
  const cases = data.rows.map(([id, verdict, seconds, message]) => {
    const parts = id.split('::');
    const bad = data.failing.includes(verdict);
    const sampled = /^sample[0-9]+$/.test(parts[parts.length - 2]);
    return {id, verdict, seconds, message, bad, op: parts[1], dtype: parts[parts.length - (sampled ? 3 : 2)],
            check: parts[parts.length - 1], repro: bad && sampled ? data.repro.replace('{id}', id) : ''};
  });
  const keys = ['verdict','check','dtype','op'];
  const control = k => document.getElementById('f-'+k);
  function wanted(){ const w={}; for(const k of keys){ w[k]=control(k).value.trim(); } return w; }
  function matches(w, c){
    return (!w.verdict || (w.verdict==='failing' ? c.bad : c.verdict===w.verdict)) &&
      (!w.check || c.check===w.check) && (!w.dtype || c.dtype===w.dtype) &&
      (!w.op || c.op.includes(w.op));
  }
  function cell(text, cls){
    const td = document.createElement('td');
    td.textContent = text;
    if(cls) td.className = cls;
    return td;
  }
  function render(){
    const w = wanted();
    const body = document.getElementById('case-rows');
    body.replaceChildren();
    let count = 0;
    for(const c of cases){
      if(!matches(w, c)) continue;
      count++;
      if(count > TABLE_ROWS) continue;
      const tr = document.createElement('tr');
      tr.append(cell(c.id), cell(c.verdict, 'v-'+c.verdict), cell(c.seconds.toFixed(3), 'n'), cell(c.message));
      const repro = document.createElement('td');
      if(c.repro){ const code=document.createElement('code'); code.textContent=c.repro; repro.append(code); }
      tr.append(repro);
      body.append(tr);
    }
    document.getElementById('case-count').textContent =
      count + ' of ' + cases.length + ' cases match' +
      (count > TABLE_ROWS ? ' (showing the first ' + TABLE_ROWS + ')' : '');
    let cards = 0;
    for(const card of document.querySelectorAll('.failure')){
      const show = matches(w, {verdict: card.dataset.verdict, bad: true, check: card.dataset.check,
                               dtype: card.dataset.dtype, op: card.dataset.op});
      card.hidden = !show; cards += show;
    }
    document.getElementById('failure-count').textContent = cards + ' failure card(s) match';
  }
  function fromAddress(){
    const params = new URLSearchParams(location.hash.slice(1) || location.search.slice(1));
    for(const k of keys){ control(k).value = params.get(k) || ''; }
    render();
  }
  function toAddress(){
    const params = new URLSearchParams();
    const w = wanted();
    for(const k of keys){ if(w[k]) params.set(k, w[k]); }
    history.replaceState(null, '', '#' + params.toString());
    render();
  }
  for(const k of keys){ control(k).addEventListener('input', toAddress); }
  window.addEventListener('hashchange', fromAddress);
  fromAddress();
  const broken = [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).length;
  document.body.dataset.brokenPictures = broken;
  if(broken){
    const banner = document.getElementById('banner');
    banner.textContent = broken + ' picture(s) failed to load';
    banner.style.display = 'block';
  }
})();
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _counts(records: list[CaseRecord], check: str | None) -> Counter:
    return Counter(r.verdict for r in records if check is None or r.case.check == check)


def _verdicts(records: list[CaseRecord]) -> str:
    """Cases per check kind and verdict."""
    verdicts = list(VERDICTS) + sorted({r.verdict for r in records} - set(VERDICTS))
    checks = [c for c in CHECK_KINDS if any(r.case.check == c for r in records)]
    rows = ["<tr><th>check</th>" + "".join(f"<th>{_e(v)}</th>" for v in verdicts) + "<th>total</th></tr>"]
    for check in [*checks, None]:
        counts = _counts(records, check)
        cells = "".join(
            f'<td class="n v-{_e(v)}">{counts[v]}</td>' if counts[v] else '<td class="n">0</td>' for v in verdicts
        )
        rows.append(f"<tr><th>{_e(check or 'total')}</th>{cells}<td class='n'>{sum(counts.values())}</td></tr>")
    return f"<table>{''.join(rows)}</table>"


def _facts(run: LoadedRun) -> str:
    """The run's suite, mode, time, workers, command, versions."""
    info = run.info
    facts = [
        ("suite", info.get("suite")),
        ("mode", info.get("mode")),
        ("executor", info.get("executor")),
        ("workers", info.get("workers")),
        ("time", f"{info['seconds']:.1f} s" if isinstance(info.get("seconds"), (int, float)) else None),
        ("cases", len(run.records)),
        ("command", " ".join(info["command"]) if isinstance(info.get("command"), list) else info.get("command")),
        ("distcheck", info.get("distcheck")),
        ("python", info.get("python")),
    ]
    listed = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in facts if v is not None)
    return f"<table>{listed}</table>"


def _case_data(records: list[CaseRecord], mode: str, spec: str | None) -> str:
    """The table's data, compact for a 45,000-case run: ``[id, verdict, seconds, first message
    line]`` per case (the page reads op, dtype and check from the id), the failing verdicts and
    the reproducer command with ``{id}`` for the case id (of suite ``spec``)."""
    rows = [[r.id, r.verdict, round(r.seconds, 3), first_line(r.message)[:MESSAGE_COLUMN]] for r in records]
    example = CaseId(records[0].case.suite if records else "SUITE", "OP", "DTYPE", "grad", 0)
    template = repro.command(example, mode, spec).replace(str(example), "{id}")
    data = {"rows": rows, "failing": list(FAILING), "repro": template}
    return json.dumps(data, separators=(",", ":")).replace("<", "\\u003c")  # nothing ends the <script>


def _options(name: str, label: str, values: list[str]) -> str:
    options = "".join(f'<option value="{_e(v)}">{_e(v)}</option>' for v in values)
    return f'<label>{label} <select id="f-{name}"><option value="">all</option>{options}</select></label>'


def _filters(records: list[CaseRecord]) -> str:
    verdicts = ["failing", *VERDICTS, *sorted({r.verdict for r in records} - set(VERDICTS))]
    checks = [c for c in CHECK_KINDS if any(r.case.check == c for r in records)]
    dtypes = sorted({r.case.dtype for r in records})
    return (
        '<div id="filters">'
        + _options("verdict", "verdict", verdicts)
        + _options("check", "check kind", checks)
        + _options("dtype", "dtype", dtypes)
        + '<label>op contains <input id="f-op" size="24"></label></div>'
    )


def _slowest(records: list[CaseRecord]) -> str:
    ran = sorted((r for r in records if r.tasks > 0), key=lambda r: -r.seconds)[:SLOWEST]
    rows = "".join(
        f"<tr><td class='n'>{r.seconds:.2f}</td><td class='n'>{r.tasks}</td>"
        f"<td class='v-{_e(r.verdict)}'>{_e(r.verdict)}</td><td>{_e(r.id)}</td></tr>"
        for r in ran
    )
    return f"<table><tr><th>seconds</th><th>tasks</th><th>verdict</th><th>case</th></tr>{rows}</table>"


def _message(text: str) -> str:
    lines = text.strip().splitlines() or ["(no message)"]
    shown = "\n".join(lines[:MESSAGE_LINES])[:MESSAGE_CHARS]
    cut = len(lines) > MESSAGE_LINES or len("\n".join(lines[:MESSAGE_LINES])) > MESSAGE_CHARS
    return f"<pre>{_e(shown)}{_e(chr(10) + '… (cut: the whole message is in the JSON report)') if cut else ''}</pre>"


def _traceback(record: CaseRecord) -> str:
    """The record's traceback (an error's), folded: the message says what raised, this where."""
    if not record.traceback:
        return ""
    lines = record.traceback.count("\n") + 1
    return f"<details><summary>Traceback ({lines} lines)</summary><pre>{_e(record.traceback)}</pre></details>"


def _pictures(run: LoadedRun, record: CaseRecord) -> str:
    path = run.blocks_path(record)
    if path is None:
        return ""
    blocks = load_blocks(io.BytesIO(location.read_bytes(path)))  # a local file or an object
    data = base64.b64encode(heatmaps.figure_png(blocks)).decode()
    alt = f"heatmaps of the Jacobian blocks of {record.id}"
    return (
        f'<figure><img class="heatmap" alt="{_e(alt)}" src="data:image/png;base64,{data}">'
        f'<figcaption class="note">{_e(heatmaps.caption(blocks))}</figcaption></figure>'
    )


def _no_pictures(run: LoadedRun, record: CaseRecord) -> str:
    if run.blocks_path(record) is not None:
        return (
            f"<p class='note'>Heatmaps are drawn for the first {PICTURES_PER_GROUP} failures of each op, "
            f"check kind and dtype ({MAX_PICTURES} in all); this one's blocks are in "
            f"<code>{_e(run.folder)}/blocks/{_e(record.blocks)}</code>.</p>"
        )
    if record.blocks is not None:
        return "<p class='note'>Its Jacobian blocks were kept, but the run folder is not at hand.</p>"
    return "<p class='note'>No Jacobian blocks: this failure is not a Jacobian mismatch.</p>"


def _failures(out: TextIO, run: LoadedRun, mode: str) -> None:
    bad = [r for r in run.records if r.verdict in FAILING]
    pictured: Counter = Counter()
    pictures = 0
    for r in bad[:MAX_CARDS]:
        case = r.case
        out.write(
            f'<section class="failure" data-verdict="{_e(r.verdict)}" data-check="{_e(case.check)}" '
            f'data-dtype="{_e(case.dtype)}" data-op="{_e(case.op)}" id="{_e(r.id)}">'
            f"<h3><span class='v-{_e(r.verdict)}'>{_e(r.verdict.upper())}</span> {_e(r.id)} "
            f"<span class='note'>({r.seconds:.2f} s)</span></h3>{_message(r.message)}{_traceback(r)}"
        )
        if case.sample is not None:
            out.write(f"<p>Reproduce: <code>{_e(repro.command(r, mode, run.spec))}</code></p>")
        group = (case.op, case.check, case.dtype)
        drawn = ""
        if pictured[group] < PICTURES_PER_GROUP and pictures < MAX_PICTURES:
            drawn = _pictures(run, r)
        if drawn:
            pictured[group] += 1
            pictures += 1
            out.write(drawn)
        else:
            out.write(_no_pictures(run, r))
        out.write("</section>\n")
    if len(bad) > MAX_CARDS:
        out.write(
            f"<p class='note'>… and {len(bad) - MAX_CARDS} more failures: each is in the case table "
            "(filter by verdict “failing”) with its first message line and reproducer.</p>"
        )


def write(out: TextIO, run: LoadedRun, trends: str = "") -> None:
    """The report of ``run`` on ``out``; ``trends``: the history's trends section, if any."""
    mode = str(run.info.get("mode") or "fast")
    title = f"distcheck: {run.info.get('suite', 'run')} ({mode} mode)"
    bad = sum(r.verdict in FAILING for r in run.records)
    out.write(
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
        f"<style>{STYLE}</style></head><body><div id='banner'></div><h1>{_e(title)}</h1>"
        f"<p>{len(run.records)} cases, {bad} failing. Made by distcheck on Python {_e(platform.python_version())}. "
        "<a href='#failures'>Failures</a> · <a href='#cases'>Cases</a> · <a href='#slowest'>Slowest cases</a> · "
        f"<a href='#run'>Run</a></p>{TRENDS_LINK if trends else ''}{_verdicts(run.records)}"
        f"<div id='filters-bar'>{_filters(run.records)}<p class='note'>The filters choose the failures' cards "
        "and the rows of the case table.</p></div>"
        f"<h2 id='failures'>Failures ({bad})</h2><p class='note'>Pictures: the first {PICTURES_PER_GROUP} failures of "
        f"each op × check kind × dtype whose Jacobian blocks were kept, {MAX_PICTURES} in all; a card for each of the "
        f"first {MAX_CARDS} failures; every failure is in the case table.</p>"
        "<p id='failure-count' class='note'></p>\n"
    )
    _failures(out, run, mode)
    out.write(trends)
    out.write(
        "<h2 id='cases'>Cases</h2><p id='case-count' class='note'></p>"
        "<table><thead><tr><th>case</th><th>verdict</th><th>seconds</th><th>message (first line)</th>"
        "<th>reproducer</th></tr></thead><tbody id='case-rows'></tbody></table>"
        f"<h2 id='slowest'>Slowest cases</h2>{_slowest(run.records)}<h2 id='run'>Run</h2>{_facts(run)}"
        f'<script type="application/json" id="case-data">{_case_data(run.records, mode, run.spec)}</script>'
        f"<script>const TABLE_ROWS = {TABLE_ROWS};{SCRIPT}</script></body></html>\n"
    )


def write_file(path: str, run: LoadedRun, trends: str = "") -> None:
    """The report of ``run`` at ``path`` (local or a URL), written whole; ``trends``: the
    history's trends section, if any."""
    out = io.StringIO()
    write(out, run, trends)
    location.write_text(path, out.getvalue())
