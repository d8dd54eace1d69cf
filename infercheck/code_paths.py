"""Executed lines as functions: which functions of a source file a traced run entered (the worker
records lines with coverage.py, `Job.trace`; docs/design.md, "Code-path evidence"). Pure."""

from __future__ import annotations

import ast
from collections.abc import Iterable


def function_spans(source: str) -> list[tuple[int, int, str]]:
    """(first line, last line, qualified name) of every function and method, outermost first;
    a decorated function starts at its first decorator."""
    spans: list[tuple[int, int, str]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                spans.append((start, child.end_lineno or child.lineno, name))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return spans


def functions_at(source: str, lines: Iterable[int]) -> set[str]:
    """The innermost function holding each line; lines at module or class level count for none."""
    spans = function_spans(source)
    out = set()
    for line in lines:
        holding = [s for s in spans if s[0] <= line <= s[1]]
        if holding:
            out.add(max(holding, key=lambda s: s[0])[2])
    return out
