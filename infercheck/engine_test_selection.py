"""Which of the engine's own tests judge a patch (docs/design.md, "Engine tests"). Pure: source
texts in, a selection out.

Contract. A test file is a candidate when it lies near a touched engine module — in the module's
mirrored folder (`vllm/v1/core/kv_cache_utils.py` → `tests/v1/core/`, and below it) or directly in
one of that folder's parents other than `tests/` itself (`tests/v1/`) — and either imports the
module or is named after it (`test_kv_cache_utils.py`). Within a candidate, a test (a `test_*` function, or a `test_*`
method of a `Test*` class) is selected when its own code names a *key* of the change: a function
the patch changes, a function of the touched module that calls one (transitively), or a
module-level name a changed function uses (transitively: what it calls, the constants they read).
A file none of whose tests is selected is left out. What runs on this platform is not guessed from
the source: a selected test that fails or errors on the unmodified engine is recorded as such and
never judged (checks/engine_tests.py).
"""

from __future__ import annotations

import ast
import json
from dataclasses import asdict, dataclass, field
from pathlib import PurePosixPath

ENGINE_PACKAGE = "vllm"
TESTS = "tests"


@dataclass(frozen=True)
class SelectedFile:
    """A test file of the engine that judges the patch: its selected node ids, and why."""

    path: str  # relative to the test tree's root, "tests/v1/core/test_kv_cache_utils.py"
    tests: tuple[str, ...]  # pytest node ids
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class EngineTestSelection:
    """The selected files, most tests first; `note` says why nothing was selected, where so."""

    files: tuple[SelectedFile, ...] = ()
    keys: tuple[str, ...] = ()  # the names a test must use to be selected
    note: str = ""
    tree: str = ""  # where the test tree came from, in words

    def node_ids(self) -> list[str]:
        return [t for f in self.files for t in f.tests]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> "EngineTestSelection":
        data = json.loads(text)
        files = tuple(SelectedFile(f["path"], tuple(f["tests"]), tuple(f["reasons"])) for f in data.get("files", []))
        return cls(files, tuple(data.get("keys", [])), data.get("note", ""), data.get("tree", ""))


@dataclass
class ModuleNames:
    """A module's top-level names and, per function (qualified), the names its code uses."""

    defined: set[str] = field(default_factory=set)
    uses: dict[str, set[str]] = field(default_factory=dict)


def names_in(node: ast.AST) -> set[str]:
    """Every bare name and attribute name a piece of code uses."""
    out = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            out.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            out.add(sub.attr)
    return out


def module_names(source: str) -> ModuleNames:
    tree = ast.parse(source)
    names = ModuleNames()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.defined |= {t.id for t in targets if isinstance(t, ast.Name)}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.uses[f"{prefix}{child.name}"] = names_in(child)
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(tree, "")
    return names


def bare(function: str) -> str:
    """"C.m" -> "m"; "f.<inner>" -> "inner"."""
    return function.rsplit(".", 1)[-1]


def change_keys(changed: list[str], source: str) -> set[str]:
    """The keys of a change to one module: its changed functions (qualified names), their callers in
    the module and the module-level names they use, each closed transitively, as bare names."""
    names = module_names(source)
    keys = {bare(f) for f in changed} | {f.split(".", 1)[0] for f in changed}
    todo = [f for f in changed if f in names.uses]
    seen = set(todo)
    while todo:  # what the changed functions use, and what that uses
        used = names.uses[todo.pop()] & names.defined
        keys |= used
        for function in (f for f in names.uses if f.split(".", 1)[0] in used and f not in seen):
            seen.add(function)
            todo.append(function)
    callers = {bare(f) for f in changed} | {f.split(".", 1)[0] for f in changed}
    grew = True
    while grew:  # who calls them, up to the module's entry points
        found = {part for f, used in names.uses.items() if used & callers for part in (bare(f), f.split(".", 1)[0])}
        grew = not found <= callers
        callers |= found
    return keys | callers


def module_of(engine_file: str) -> str:
    """"vllm/v1/core/kv_cache_utils.py" -> "vllm.v1.core.kv_cache_utils"."""
    path = PurePosixPath(engine_file).with_suffix("")
    parts = path.parts[:-1] if path.name == "__init__" else path.parts
    return ".".join(parts)


def imports_module(tree: ast.AST, module: str) -> bool:
    """Whether a test file imports the module (`import m`, `from m import x`, `from parent import name`)."""
    parent, _, name = module.rpartition(".")
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name == module or a.name.startswith(module + ".") for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == module or node.module.startswith(module + "."):
                return True
            if node.module == parent and any(a.name == name for a in node.names):
                return True
    return False


def near(test_file: str, engine_file: str) -> bool:
    """Whether a test file lies in the engine file's mirrored folder (or below it), or directly in
    one of that folder's parents other than tests/ itself."""
    mirrored = PurePosixPath(TESTS, *PurePosixPath(engine_file).parts[1:-1])
    folder = PurePosixPath(test_file).parent
    if folder == mirrored or mirrored in folder.parents:
        return True
    return folder in mirrored.parents and len(folder.parts) > 1


def nodes_of(tree: ast.Module, path: str) -> list[tuple[str, ast.AST]]:
    """(node id, code) of each test of a file: top-level test_* functions, test_* methods of Test* classes."""
    out: list[tuple[str, ast.AST]] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            out.append((f"{path}::{node.name}", node))
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            out += [(f"{path}::{node.name}::{m.name}", m) for m in node.body
                    if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name.startswith("test")]
    return out


def select_tests(changed: list[str], engine_sources: dict[str, str], test_sources: dict[str, str]) -> EngineTestSelection:
    """The engine tests that judge a change (the contract above). `changed`: "file::function" of the
    functions the patch changes (codemap.changed_functions); `engine_sources`: touched engine file
    -> its text before the patch; `test_sources`: test file (relative to the tree's root) -> text."""
    by_file: dict[str, list[str]] = {}
    for item in changed:
        file, _, function = item.partition("::")
        by_file.setdefault(file, []).append(function)
    keys = {file: change_keys(functions, engine_sources[file]) for file, functions in by_file.items()
            if file in engine_sources}
    if not keys:
        return EngineTestSelection(note="the patch changes no function of an engine Python file")
    files = []
    for path, text in sorted(test_sources.items()):
        if not PurePosixPath(path).name.startswith("test_"):
            continue
        nearby = [f for f in keys if near(path, f)]
        if not nearby:
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        reasons = [f"{'named after' if PurePosixPath(path).stem == 'test_' + PurePosixPath(f).stem else 'imports'} "
                   f"{f}" for f in nearby if PurePosixPath(path).stem == "test_" + PurePosixPath(f).stem
                   or imports_module(tree, module_of(f))]
        if not reasons:
            continue
        wanted = set().union(*(keys[f] for f in nearby))
        tests, used = [], set()
        for node_id, code in nodes_of(tree, path):
            hit = names_in(code) & wanted
            if hit:
                tests.append(node_id)
                used |= hit
        if tests:
            files.append(SelectedFile(path, tuple(tests), (*reasons, f"its tests use {', '.join(sorted(used)[:4])}"
                                                           + (" …" if len(used) > 4 else ""))))
    files.sort(key=lambda f: (-len(f.tests), f.path))
    all_keys = tuple(sorted(set().union(*keys.values())))
    return EngineTestSelection(tuple(files), all_keys, "" if files else "no engine test near the touched modules uses "
                         "what the patch changes")
