"""The HTML report: self-contained, bounded for large runs, and working in a real headless browser."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from distcheck.records.case_record import CaseRecord
from distcheck.reports import html
from distcheck.reports.load import load_run
from tests.reports.runs import MISMATCH, case, records, run_folder


class _Page(HTMLParser):
    """Elements of a page with their attributes (enough for these tests)."""

    def __init__(self, text: str):
        super().__init__()
        self.elements: list[tuple[str, dict]] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def all(self, tag: str, **wanted) -> list[dict]:
        return [a for t, a in self.elements if t == tag and all(a.get(k) == v for k, v in wanted.items())]


def _page(tmp_path, records_=None) -> tuple[str, str]:
    folder = run_folder(tmp_path / "run", records_)
    path = str(tmp_path / "report.html")
    html.write_file(path, load_run(folder))
    with open(path, encoding="utf-8") as f:
        return path, f.read()


def test_self_contained_with_every_part(tmp_path):
    _, text = _page(tmp_path)
    page = _Page(text)
    assert not page.all("link") and all("src" not in a for a in page.all("script"))
    assert all(a["src"].startswith("data:image/png;base64,") for a in page.all("img"))
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text)
    assert "Slowest cases" in text and "600.00" in text  # the timed-out case leads
    cards = page.all("section", **{"class": "failure"})
    assert [c["id"].split("::")[1] for c in cards] == ["sin", "sin", "cos", "mm"]
    assert len(page.all("img")) == 2  # the two Jacobian mismatches
    assert text.count("distcheck repro torch-opinfo::sin::float64::sample3::grad &gt; repro.py") == 1
    assert "No Jacobian blocks: this failure is not a Jacobian mismatch." in text
    assert "<expected>" not in text and "\\u003cexpected>" in text  # messages are escaped in the data


def _png_size(img: dict) -> tuple[int, int]:
    import base64
    import struct

    png = base64.b64decode(img["src"].split(",", 1)[1])
    return struct.unpack(">II", png[16:24])  # the IHDR chunk's width and height


def test_failures_come_first_with_readable_heatmaps(tmp_path):
    """The failures' cards come before the long case table; a heatmap panel is drawn at about
    480 × 420 pixels (three panels a row, complex blocks' imaginary parts on a second row),
    with a title and labelled colour bars."""
    _, text = _page(tmp_path)
    assert text.index("id='failures'") < text.index('class="failure"') < text.index("id='case-rows'")
    assert text.index("id='filters-bar'") < text.index("id='failures'")  # the filters choose both
    real, complex_ = (_png_size(img) for img in _Page(text).all("img", **{"class": "heatmap"}))
    assert real[0] >= 1300 and real[1] >= 400 and complex_[1] >= 1.8 * real[1]
    assert "img.heatmap{width:100%" in text


def test_pictures_are_bounded_per_op_check_and_dtype(tmp_path):
    many = [CaseRecord(case("sin", sample=k), "fail", MISMATCH, 0.1, 1) for k in range(5)]
    _, text = _page(tmp_path, many + [CaseRecord(case("cos"), "fail", MISMATCH, 0.1, 1)])
    assert len(_Page(text).all("img")) == html.PICTURES_PER_GROUP + 1
    assert text.count("Heatmaps are drawn for the first 2 failures") == 3


def _chromium() -> str | None:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed: .ci/run installs it before the tests")
        pytest.skip("chromium is not installed (apt-get install chromium); CI installs it")
    return found


def _browse(tmp_path, url: str) -> tuple[str, str]:
    """The DOM after the page has loaded and run its script, and the browser's log."""
    command = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        "--dump-dom",
        url,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, done.stderr


def _rows(dom: str) -> list[str]:
    body = dom.split('id="case-rows">', 1)[1].split("</tbody>", 1)[0]
    return re.findall(r"<tr><td>([^<]*)</td>", body)


def test_in_a_real_browser(tmp_path):
    path, _ = _page(tmp_path)
    dom, log = _browse(tmp_path, f"file://{path}")
    assert "CONSOLE" not in log and "Uncaught" not in log, log
    assert len(_rows(dom)) == len(records())
    assert 'data-broken-pictures="0"' in dom  # every picture decoded
    page = _Page(dom)
    for card in page.all("section", **{"class": "failure"}):
        assert "hidden" not in card
    assert len(page.all("img", **{"class": "heatmap"})) == 2
    assert dom.index('class="failure"') < dom.index('id="case-rows"')  # the failures first, as drawn

    dom, log = _browse(tmp_path, f"file://{path}#verdict=failing&check=grad")
    assert "CONSOLE" not in log
    assert _rows(dom) == [
        "torch-opinfo::sin::float64::sample3::grad",
        "torch-opinfo::mm::complex128::sample0::grad",
    ]
    shown = [c["id"] for c in _Page(dom).all("section", **{"class": "failure"}) if "hidden" not in c]
    assert shown == _rows(dom)
    assert "2 of 8 cases match" in dom

    dom, _ = _browse(tmp_path, f"file://{path}#dtype=complex128&op=m")
    assert _rows(dom) == ["torch-opinfo::mm::complex128::sample0::grad"]
    dom, _ = _browse(tmp_path, f"file://{path}#verdict=xfail")
    assert _rows(dom) == ["torch-opinfo::cov::float64::grad"] and "0 failure card(s) match" in dom
