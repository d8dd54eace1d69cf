"""Code paths over executed lines (the worker records lines with coverage.py, `Job.trace`;
docs/design.md, "Code-path evidence"). Pure: which functions of a source file a traced run
entered, which changed hunks of a patch a run executed, which functions a patch stopped running."""

from __future__ import annotations

import ast
import difflib
from collections.abc import Callable, Iterable
from dataclasses import dataclass


FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


def _spans(source: str, first_line: Callable[[FunctionNode], int]) -> list[tuple[int, int, str]]:
    """(first_line(function), last line, qualified name) of every function and method, outermost first."""
    spans: list[tuple[int, int, str]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                spans.append((first_line(child), child.end_lineno or child.lineno, name))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return spans


def function_spans(source: str) -> list[tuple[int, int, str]]:
    """(first line, last line, qualified name) of every function and method, outermost first;
    a decorated function starts at its first decorator."""
    return _spans(source, lambda f: min([f.lineno, *(d.lineno for d in f.decorator_list)]))


def body_spans(source: str) -> list[tuple[int, int, str]]:
    """(first body line, last line, qualified name) of every function, outermost first: the lines
    that run only when the function is called (its `def` line and decorators run at import)."""
    return _spans(source, lambda f: f.body[0].lineno)


def _innermost(spans: list[tuple[int, int, str]], lines: Iterable[int]) -> set[str]:
    out = set()
    for line in lines:
        holding = [s for s in spans if s[0] <= line <= s[1]]
        if holding:
            out.add(max(holding, key=lambda s: s[0])[2])
    return out


def functions_run(source: str, lines: Iterable[int]) -> set[str]:
    """The functions a run executed: the innermost function whose body holds each line (a `def`
    line run at import, or a decorator, calls nothing)."""
    return _innermost(body_spans(source), lines)


def functions_at(source: str, lines: Iterable[int]) -> set[str]:
    """The innermost function holding each line; lines at module or class level count for none."""
    return _innermost(function_spans(source), lines)


def changed_functions(hunks: Iterable[Hunk], base_source: str, patched_source: str) -> set[str]:
    """The functions (qualified names) that hold a line of the hunks, in the base or in the patched file."""
    out: set[str] = set()
    for hunk in hunks:
        out |= functions_at(base_source, range(hunk.base_start, hunk.base_end))
        out |= functions_at(patched_source, range(hunk.patched_start, hunk.patched_end))
    return out


def nested(a: str, b: str) -> bool:
    """Whether one qualified name is the other or holds it (`A.f` and `A.f.inner`)."""
    return a == b or a.startswith(f"{b}.") or b.startswith(f"{a}.")


@dataclass(frozen=True)
class Hunk:
    """One changed region of a file: lines [base_start, base_end) of the base file became lines
    [patched_start, patched_end) of the patched file (1-based; an empty range is a pure insertion
    or deletion)."""

    file: str
    base_start: int
    base_end: int
    patched_start: int
    patched_end: int

    @property
    def name(self) -> str:
        """"vllm/x.py:-120,3 +120,4", the unified-diff way of naming it."""
        return (f"{self.file}:-{self.base_start},{self.base_end - self.base_start}"
                f" +{self.patched_start},{self.patched_end - self.patched_start}")


def changed_hunks(file: str, base_source: str, patched_source: str) -> list[Hunk]:
    """The hunks between the base and the patched text of one file, line by line (difflib), so the
    line numbers are those of the files the workers ran, whatever offsets the patch applied with.
    A new file is base_source ""; a deleted one patched_source ""."""
    matcher = difflib.SequenceMatcher(None, base_source.splitlines(), patched_source.splitlines(), autojunk=False)
    return [Hunk(file, i1 + 1, i2 + 1, j1 + 1, j2 + 1)
            for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def statement_lines(source: str, first: int, end: int) -> set[int]:
    """The first lines of the statements whose own lines meet [first, end): what a line tracer
    (coverage.py) reports when those lines run. A simple statement owns all its lines (a change in
    a continuation line is a change of the statement); a compound one (if, for, def, with, ...)
    owns its header only, not its body. Docstrings and bare strings are no statements here."""
    if first >= end:
        return set()
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set(range(first, end))  # not Python we can parse: every line stands for itself
    out: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or _is_string_statement(node):
            continue
        body = [child for field in ("body", "orelse", "finalbody", "handlers", "cases")
                for child in getattr(node, field, None) or [] if isinstance(child, ast.AST)]
        own_end = (min(c.lineno for c in body) - 1) if body else (node.end_lineno or node.lineno)
        if node.lineno < end and own_end >= first:
            out.add(node.lineno)
    return out


def _is_string_statement(node: ast.stmt) -> bool:
    """A docstring or a bare string: no tracer reports it as run."""
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def hunk_statements(hunk: Hunk, base_source: str, patched_source: str) -> tuple[set[int], set[int]]:
    """(removed, added): the statement lines of the hunk in the base file and in the patched file."""
    return (statement_lines(base_source, hunk.base_start, hunk.base_end),
            statement_lines(patched_source, hunk.patched_start, hunk.patched_end))


def hunk_executed(hunk: Hunk, base_source: str, patched_source: str, base_lines: set[int],
                  patched_lines: set[int]) -> bool | None:
    """Whether a check ran the hunk: one of its added statements ran on patched, or one of its
    removed statements ran on base (a deletion is exercised where base ran what it deleted).
    None: the hunk holds no statement on either side (comments, blank lines, docstrings)."""
    return statements_executed(*hunk_statements(hunk, base_source, patched_source), base_lines, patched_lines)


def statements_executed(removed: set[int], added: set[int], base_lines: set[int],
                        patched_lines: set[int]) -> bool | None:
    """hunk_executed over a hunk's statement lines (hunk_statements), for reading many runs of one hunk."""
    if not added and not removed:
        return None
    return bool(added & patched_lines) or bool(removed & base_lines)


@dataclass(frozen=True)
class Bypass:
    """A function of a touched file that checks ran on base and never run on patched."""

    file: str
    function: str
    checks: tuple[str, ...]  # the checks that ran it on base and do not on patched


def bypassed_functions(file: str, base_source: str, patched_source: str, base_runs: dict[str, set[int]],
                       patched_runs: dict[str, set[int]]) -> list[Bypass]:
    """Functions that still exist on patched (same qualified name) and that some check executed on
    base but that no check executes on patched: the patch routed around them (docs/design.md,
    "Code-path evidence"). A function the patch removes or renames is a rewrite, not a bypass; a
    check that did not run on patched (missing from patched_runs) is not judged."""
    still_there = {name for _, _, name in function_spans(patched_source)} if patched_source else set()
    on_patched = _innermost(body_spans(patched_source), set().union(*patched_runs.values())) \
        if patched_source and patched_runs else set()
    base_spans = body_spans(base_source) if base_source else []
    by_function: dict[str, list[str]] = {}
    for check, lines in base_runs.items():
        if check not in patched_runs:
            continue
        for name in _innermost(base_spans, lines):
            if name in still_there and name not in on_patched:
                by_function.setdefault(name, []).append(check)
    return [Bypass(file, name, tuple(sorted(checks))) for name, checks in sorted(by_function.items())]


@dataclass(frozen=True)
class BlockBypass:
    """A branch of a touched file (the body of an if/else, a loop, a handler, ...) that the patch
    left unchanged, that checks ran on base, and that no check runs on patched."""

    file: str
    function: str  # the function holding it ("" at module level)
    base_line: int  # its first statement, in the base file
    base_end: int  # its last line, in the base file
    patched_line: int  # its first statement, in the patched file
    checks: tuple[str, ...]


def _blocks(tree: ast.AST) -> list[list[ast.stmt]]:
    """The statement lists that run only when a branch is taken: bodies of compound statements other
    than function and class definitions (whose bodies are the functions themselves)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
            continue
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                out.append(block)
        for handler in getattr(node, "handlers", None) or []:
            out.append(handler.body)
        for case in getattr(node, "cases", None) or []:
            out.append(case.body)
    return out


def unchanged_line_map(base_source: str, patched_source: str) -> dict[int, int]:
    """Base line -> patched line, for the lines the patch did not change."""
    matcher = difflib.SequenceMatcher(None, base_source.splitlines(), patched_source.splitlines(), autojunk=False)
    return {i1 + 1 + k: j1 + 1 + k for tag, i1, i2, j1, _ in matcher.get_opcodes() if tag == "equal"
            for k in range(i2 - i1)}


def bypassed_blocks(file: str, base_source: str, patched_source: str, base_runs: dict[str, set[int]],
                    patched_runs: dict[str, set[int]]) -> list[BlockBypass]:
    """Branches the patch left as they were that a check ran on base and no check runs on patched
    (a call routed around inside a function that still runs: `if generators: return other(...)`
    placed before the seeded path). Only checks that ran on both sides are read."""
    if not base_source or not patched_source:
        return []
    try:
        tree = ast.parse(base_source)
    except SyntaxError:
        return []
    same = unchanged_line_map(base_source, patched_source)
    on_patched = set().union(*patched_runs.values()) if patched_runs else set()
    spans = function_spans(base_source)
    out = []
    for block in _blocks(tree):
        first, last = block[0].lineno, max(s.end_lineno or s.lineno for s in block)
        if any(line not in same for line in range(first, last + 1)) or same[first] in on_patched:
            continue
        checks = tuple(sorted(c for c, lines in base_runs.items() if c in patched_runs and first in lines))
        if checks:
            holder = _innermost(spans, [first])
            out.append(BlockBypass(file, next(iter(holder), ""), first, last, same[first], checks))
    outermost = [b for b in out if not any(a is not b and a.base_line <= b.base_line and b.base_end <= a.base_end
                                           for a in out)]
    return sorted(outermost, key=lambda b: b.base_line)
