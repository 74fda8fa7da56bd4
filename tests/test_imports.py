"""The package's modules import downward: no import cycle, read from the source (every import
statement counts, those inside functions and under ``TYPE_CHECKING`` included), and every
module imports on its own."""

from __future__ import annotations

import ast
import importlib
import pathlib

import pytest

import distcheck

ROOT = pathlib.Path(distcheck.__file__).parent


def modules() -> dict[str, pathlib.Path]:
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported(name: str, path: pathlib.Path, known: set[str]) -> set[str]:
    """The package's modules that module ``name`` imports: ``from a.b import c`` imports the
    module ``a.b.c`` if there is one, else ``a.b``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            subs = {f"{base}.{alias.name}" for alias in node.names} & known
            found |= subs if len(subs) == len(node.names) else {*subs, base}
    return (found & known) - {name}


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while not component or w != v:
                w = stack.pop()
                component.add(w)
            if len(component) > 1:
                found.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def import_graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imported(name, path, set(found)) for name, path in found.items()}


def test_the_cycle_finder_finds_a_cycle_and_only_it():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [{"a", "b", "c"}]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_package_has_no_import_cycle():
    graph = import_graph()
    assert "distcheck.runner.dispatch" in graph and "distcheck.runner.protocols" in graph
    assert "distcheck.runner.protocols" in graph["distcheck.runner.dispatch"]
    assert "distcheck.cli.run" in graph["distcheck.cli"]  # the graph sees imports in functions too
    assert cycles(graph) == []


@pytest.mark.parametrize("name", sorted(m for m in modules() if m.startswith(("distcheck.runner", "distcheck.case"))))
def test_every_runner_module_imports(name):
    importlib.import_module(name)


READERS = ("distcheck.reports", "distcheck.history", "distcheck.cli")


@pytest.mark.parametrize(
    ("below", "above"),
    [
        ("distcheck.records", ("distcheck.storage", "distcheck.runner", *READERS)),
        ("distcheck.storage", ("distcheck.runner", *READERS)),
        ("distcheck.runner", READERS),
        ("distcheck.case", ("distcheck.runner", *READERS)),
        ("distcheck.suites", ("distcheck.case", "distcheck.runner", *READERS)),
    ],
)
def test_what_a_run_says_where_it_is_kept_and_the_runner_lie_below_their_readers(below, above):
    """Records (what a run says) lie below storage (where it is kept), both below the runner
    (which makes them), and all three below the reports, the history and the command line
    (which read them); one case (its run, budget and verdict) lies below the runner that places
    it, and the suites below both: no module of a lower layer imports a higher one."""
    upward = {
        (name, target)
        for name, targets in import_graph().items()
        if name == below or name.startswith(below + ".")
        for target in targets
        if target.startswith(above)
    }
    assert upward == set()


# Each file one job (issue 49): the runner's files short enough to read in one sitting, the rest
# of the package's not much longer, the runner read whole by a newcomer; a file that grows past
# these is split, not let grow.
RUNNER_LINES, PACKAGE_LINES, RUNNER_TOTAL_LINES = 300, 400, 2500


def _lines(path: pathlib.Path) -> int:
    return len(path.read_text().splitlines())


@pytest.mark.parametrize("name", sorted(modules()))
def test_no_file_grows_past_its_limit(name: str):
    path = modules()[name]
    limit = RUNNER_LINES if name.startswith("distcheck.runner") else PACKAGE_LINES
    assert _lines(path) <= limit, f"{path.relative_to(ROOT.parent)}: {_lines(path)} lines, over {limit}: split it"


def test_the_runner_stays_small():
    lines = sum(_lines(path) for path in (ROOT / "runner").rglob("*.py"))
    assert lines <= RUNNER_TOTAL_LINES, f"distcheck/runner/: {lines} lines, over {RUNNER_TOTAL_LINES:,}"
