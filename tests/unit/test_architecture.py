"""The package's import graph, built from the source with ast (no import executed): no cycles
between modules, and none between the package's stages and subpackages (docs/design.md, "Layers")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "infercheck"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """module -> the infercheck modules it imports, anywhere in its body (lazy and TYPE_CHECKING
    imports included: a cycle through them is still a cycle in the design)."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges: set[str] = set()
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [base]).strip(".")
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            edges |= {t for t in targets if t in modules and t != name}
        graph[name] = edges
    return graph


def unit_of(module: str) -> str:
    """The design unit of a module: a top-level module, or the subpackage it lives in."""
    parts = module.split(".")
    return ".".join(parts[:2])


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path [a, b, ..., a], or None (iterative depth-first search)."""
    state: dict[str, int] = {}
    for root in sorted(graph):
        if state.get(root):
            continue
        stack = [(root, iter(sorted(graph[root])))]
        path = [root]
        state[root] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                state[node] = 2
            elif state.get(child) == 1:
                return path[path.index(child):] + [child]
            elif not state.get(child):
                state[child] = 1
                path.append(child)
                stack.append((child, iter(sorted(graph.get(child, ())))))
    return None


def collapsed(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for module, edges in graph.items():
        unit = unit_of(module)
        out.setdefault(unit, set()).update(unit_of(e) for e in edges if unit_of(e) != unit)
    return out


def test_graph_sees_the_package():
    graph = import_graph()
    assert "infercheck.pipeline" in graph and "infercheck.run.worker" in graph
    assert "infercheck.grade" in graph["infercheck.pipeline"]


def test_no_import_cycle_between_modules():
    assert find_cycle(import_graph()) is None


def test_no_import_cycle_between_stages_and_subpackages():
    assert find_cycle(collapsed(import_graph())) is None


@pytest.mark.parametrize("graph, cycle", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
    ({"a": {"b"}, "b": set(), "c": {"b"}}, None),
])
def test_find_cycle_finds_cycles_and_only_cycles(graph, cycle):
    assert find_cycle(graph) == cycle
