"""The README is a user's first page: its Python examples run as written, it stays short, its
links lead somewhere, and every headline figure comes with the command that prints it."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
TEXT = README.read_text()
EXAMPLES = re.findall(r"```python\n(.*?)```", TEXT, flags=re.S)
PAGES = [README, ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
MAX_LINES = 400


def test_readme_has_examples():
    assert len(EXAMPLES) >= 2


@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_readme_example_runs(index):
    exec(compile(EXAMPLES[index], f"README example {index}", "exec"), {})


def test_the_ray_example_runs_where_it_says(tmp_path):
    """The README's ``executor="ray"`` example says its check stays in this process (under 1 s of
    estimated work) and starts no Ray: run alone, it leaves Ray uninitialized."""
    import os
    import subprocess
    import sys

    (example,) = [e for e in EXAMPLES if 'executor="ray")  # under 1 s of work: checked here, no Ray started' in e]
    script = f"{example}\nimport ray\nprint('ray started:', ray.is_initialized())\n"
    variables = ("DISTCHECK_EXECUTOR", "DISTCHECK_RAY_ADDRESS", "DISTCHECK_LOCAL_BELOW", "DISTCHECK_RAY_SESSION")
    env = {k: v for k, v in os.environ.items() if k not in variables}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip().endswith("ray started: False"), done.stderr[-2000:]


def test_readme_is_short():
    assert len(TEXT.splitlines()) <= MAX_LINES


def test_readme_names_the_two_commands():
    assert "make check-local" in TEXT
    assert "make test" in TEXT


def _local_links(page: pathlib.Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    return [t.split("#")[0] for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_local_links_lead_to_files(page):
    missing = [t for t in _local_links(page) if not (page.parent / t).exists()]
    assert not missing, f"{page.relative_to(ROOT)} links to missing files: {missing}"


def test_every_doc_page_is_linked_from_the_readme():
    linked = {(README.parent / t).resolve() for t in _local_links(README)}
    unlinked = [p.name for p in PAGES[1:] if p.resolve() not in linked]
    assert not unlinked, f"docs not linked from the README: {unlinked}"


def _headline_rows() -> list[list[str]]:
    section = TEXT.split("## Headline figures", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def test_readme_has_one_table_of_headline_figures():
    assert TEXT.count("## Headline figures") == 1
    assert len(_headline_rows()) >= 3


@pytest.mark.parametrize("row", _headline_rows(), ids=lambda row: row[0][:40])
def test_every_headline_figure_has_its_command(row):
    command = row[-1]
    assert re.search(r"`(\.venv/bin/python |make |distcheck |python )[^`]+`", command), row
    assert re.search(r"\d", row[-2]), row
