"""The engines package imports in one direction: the interface (base) below what is written once
on it (checks, complex parts, derivatives, the reference call) and the registry, and no module
imports one that imports it back (TYPE_CHECKING imports included)."""

from __future__ import annotations

import ast
from pathlib import Path

import distcheck.engines

PACKAGE = Path(distcheck.engines.__file__).parent


def _imports(path: Path, modules: set[str]) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "distcheck.engines":
                found.update(a.name for a in node.names if a.name in modules)
            elif node.module.startswith("distcheck.engines."):
                found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[2] for a in node.names if a.name.startswith("distcheck.engines."))
    return found & modules


def _graph() -> dict[str, set[str]]:
    modules = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    return {m: _imports(PACKAGE / f"{m}.py", modules) for m in modules}


def test_no_import_cycle_in_the_engines_package():
    graph, done, path = _graph(), set(), []

    def visit(module: str) -> None:
        assert module not in path, f"import cycle: {' -> '.join(path[path.index(module) :] + [module])}"
        if module in done:
            return
        path.append(module)
        for imported in sorted(graph[module]):
            visit(imported)
        path.pop()
        done.add(module)

    for module in sorted(graph):
        visit(module)
    assert graph["base"] <= {"wording"}  # the interface knows nothing written on it


def test_no_engine_file_is_over_400_lines():
    lengths = {p.name: len(p.read_text().splitlines()) for p in PACKAGE.glob("*.py")}
    assert max(lengths.values()) <= 400, lengths
