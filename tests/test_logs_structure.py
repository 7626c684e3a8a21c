"""The log package has no import circle and no module a reader has to wade through."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "trainsleuth" / "tools" / "logs"
PREFIX = "trainsleuth.tools.logs"


def _module(path: Path) -> str:
    rel = path.relative_to(PKG).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join([PREFIX, *parts])


def _imports() -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere, lazy imports inside functions included
    (a circle through a lazy import is still a circle); `if TYPE_CHECKING:` blocks are left out."""
    modules = {_module(p): p for p in PKG.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        tree = ast.parse(path.read_text())
        typing_only = {
            id(n)
            for block in ast.walk(tree)
            if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
            for n in ast.walk(block)
        }
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PREFIX):
                deps.add(node.module)
                deps.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.startswith(PREFIX))
        graph[name] = {d for d in deps if d in modules and d != name}
    return graph


def test_no_import_circle() -> None:
    graph = _imports()
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if dep == PREFIX:  # the package's own lazy __init__ imports only readers' names
                continue
            assert state.get(dep) != 1, "import circle: " + " -> ".join([*path, node, dep])
            if dep not in state:
                visit(dep, [*path, node])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    # the circle issue 16 names is gone: spans and the CSV reader import only the bottom layer
    assert f"{PREFIX}.readers" not in graph[f"{PREFIX}.spans"]
    assert f"{PREFIX}.readers" not in graph[f"{PREFIX}.formats.csvfile"]


def test_modules_stay_readable() -> None:
    long = {
        p.relative_to(PKG).as_posix(): n
        for p in PKG.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 600
    }
    assert not long, f"split these along their concepts: {long}"
