"""The source's shape: imports point one way (no circle of modules, nor of top-level packages),
and no module grows past what one reader holds in mind."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).parents[1] / "src" / "prefrl"
MAX_LINES = 450


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The prefrl modules `name` imports anywhere in its file (inside functions and
    `if TYPE_CHECKING:` blocks too: a circle through a lazy import is still a circle)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            for alias in node.names:  # (`from pkg import module` imports the module)
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    return {m for m in found if m in modules and m != name}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            part = []
            while (top := stack.pop()) != node:
                part.append(top)
            if part:
                circles.append(sorted([node, *part]))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_no_module_imports_itself_round_a_circle(graph):
    assert _circles(graph) == []


def test_the_top_level_packages_import_each_other_one_way(graph):
    def top(module: str) -> str:
        return module.split(".")[1] if "." in module else module

    packages: dict[str, set[str]] = {}
    for module, imported in graph.items():
        packages.setdefault(top(module), set()).update(top(m) for m in imported)
    for name, imported in packages.items():
        imported.discard(name)
        imported.discard("prefrl")  # (the package's own __init__: its lazy public names)
    assert _circles(packages) == []


def test_the_checks_find_a_circle_when_there_is_one():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c"]]
    tree = {"prefrl.x": SRC / "__init__.py"}
    assert _imports("prefrl.x", SRC / "__init__.py", tree) == set()


def test_no_module_is_longer_than_one_reader_holds_in_mind():
    long = {str(p.relative_to(SRC)): n for p in SRC.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}  # fmt: skip
    assert long == {}
