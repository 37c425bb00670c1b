"""The floors contract of pyproject.toml (import-linter) holds, so `make test`, and so CI,
refuses a new import against the grain as `make lint` does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_floors_contract_holds() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 kept, 0 broken" in done.stdout


def _module_imports() -> dict[str, set[str]]:
    """Every module of src/tessera and the Tessera modules it imports anywhere in its text
    (at the top, inside functions, under ``TYPE_CHECKING``)."""
    import ast

    src = ROOT / "src"
    paths = {}
    for path in (src / "tessera").rglob("*.py"):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        paths[".".join(parts)] = path
    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                graph[name] |= {a.name for a in node.names if a.name in paths}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    full = f"{node.module}.{a.name}"
                    if full in paths:
                        graph[name].add(full)
                    elif node.module in paths:
                        graph[name].add(node.module)
        graph[name].discard(name)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

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
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_two_modules_import_each_other() -> None:
    """No circle of imports between files, counting imports inside functions and under
    ``TYPE_CHECKING`` (the layers contract checks packages; this checks files)."""
    graph = _module_imports()
    assert "tessera.array.read.tiles" in graph["tessera.array.read.updates"]  # it sees edges
    assert _cycles(graph) == []


def test_the_cycle_check_finds_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_two_sibling_packages_import_each_other() -> None:
    """Within every package, its children (modules and subpackages, each taken with all it
    holds) import one another without a circle: ``tessera.array.read`` may use
    ``tessera.array.fragment``, but then nothing of the fragment module may use the read
    package."""
    graph = _module_imports()
    found = []
    for package in sorted({m.rsplit(".", 1)[0] for m in graph if "." in m}):
        child = {m: f"{package}.{m[len(package) + 1:].split('.')[0]}" for m in graph
                 if m.startswith(package + ".")}
        siblings: dict[str, set[str]] = {c: set() for c in child.values()}
        for module, c in child.items():
            siblings[c] |= {child[d] for d in graph[module] if d in child and child[d] != c}
        found += _cycles(siblings)
    assert found == []


def test_no_module_is_over_700_lines() -> None:
    """Modules stay small (docs/architecture.md): split along a seam past 700 lines."""
    root = Path(__file__).parents[1] / "src" / "tessera"
    long = {str(p.relative_to(root)): n for p in root.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 700}
    assert long == {}
