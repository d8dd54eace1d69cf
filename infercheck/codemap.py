"""The recorded code map: which engine functions each app and oracle runs beyond plain generation
(docs/design.md, "Code-path evidence"). Built once per engine version by `infercheck codemap build`
(every app and oracle on the clean engine, coverage over the whole engine package) and committed
as suites/codemap/<engine>-<version>.json; read by the neighbour selection, which adds every app
that runs a function the patch changes to the glob map's choice.

An app's *reach* is the set of functions holding a line its groups execute that the baseline (the
smoke parity suite: plain greedy generation on the default model) does not. A change to a function the baseline
runs is on every request's path: the parity and accuracy suites of every validate execute it, and
the glob map names the apps whose area it is; a change to a function only some apps reach selects
exactly those apps. Everything here is pure over stored data except load/save.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from infercheck.code_paths import functions_at
from infercheck.errors import InfercheckError
from infercheck.paths import SUITES_DIR

CODEMAP_DIR = SUITES_DIR / "codemap"
HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")
OLD_HEADER = re.compile(r"^--- (?:a/)?(\S+)")


@dataclass(frozen=True)
class CodeMap:
    """engine: "vllm 0.32.0"; baseline: the functions plain generation runs (counted in the stored
    map, not listed: thousands); reach: app or oracle name -> the functions it runs beyond the
    common path; definitions: name -> the digest of its suite file when the map was recorded (a map
    older than an app's definition is stale for that app)."""

    engine: str
    baseline: frozenset[str]
    reach: dict[str, frozenset[str]]
    definitions: dict[str, str] = field(default_factory=dict)

    def apps_running(self, functions: Iterable[str]) -> dict[str, list[str]]:
        """App name -> the given functions ("vllm/x.py::Class.f") it reaches, for the apps reaching any."""
        wanted = set(functions)
        out = {app: sorted(wanted & reached) for app, reached in sorted(self.reach.items())}
        return {app: names for app, names in out.items() if names}

    def stale(self, digests: dict[str, str]) -> list[str]:
        """The apps whose current definition (name -> digest) the map was not recorded with."""
        return sorted(name for name, digest in digests.items() if self.definitions.get(name) != digest)

    def to_json(self) -> str:
        return json.dumps({"engine": self.engine, "baseline_functions": len(self.baseline),
                           "definitions": dict(sorted(self.definitions.items())),
                           "reach": {app: sorted(f) for app, f in sorted(self.reach.items())}}, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str, label: str) -> CodeMap:
        try:
            data = json.loads(text)
            return cls(str(data["engine"]), frozenset(),
                       {app: frozenset(f) for app, f in data["reach"].items()}, dict(data.get("definitions") or {}))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise InfercheckError(f"code map {label} is not a code map ({type(exc).__name__}: {exc}); "
                                  f"rebuild it with `infercheck codemap build`") from None


def codemap_path(distribution: str, version: str) -> Path:
    return CODEMAP_DIR / f"{distribution}-{version}.json"


def load_codemap(path: Path) -> CodeMap | None:
    """The stored map, or None where this engine version has none (the glob map alone selects)."""
    if not path.is_file():
        return None
    return CodeMap.from_json(path.read_text(), str(path))


def definition_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


Lines = dict[str, dict[str, set[int]]]  # check -> file -> executed lines


def lines_by_check(trace: dict[str, dict[str, list[int]]], group_checks: dict[str, list[str]]) -> Lines:
    """Check name -> file -> the lines its groups executed (trace: a worker's group -> file -> lines)."""
    out: Lines = {}
    for group, checks in group_checks.items():
        for check in checks:
            for file, executed in trace.get(group, {}).items():
                out.setdefault(check, {}).setdefault(file, set()).update(executed)
    return out


def record_codemap(engine: str, lines: Lines, sources: dict[str, str], baseline_checks: list[str],
                   app_checks: dict[str, str], definitions: dict[str, str]) -> CodeMap:
    """The map from what each check executed. An app reaches the functions holding a line it ran
    that neither the baseline nor every app ran (each app's engine starts after another's shut
    down; the baseline's is the worker's first): lines, not whole functions, because every engine start runs much of
    the engine once (vLLM warms the sampler up with penalties and logprobs on), so the functions a
    feature uses are mostly "run" by plain generation too, on other branches. baseline_checks: the
    plain-generation checks; app_checks: each app's check name ("app/x", "oracle/y") -> its name;
    sources: file -> its text (files without text are skipped)."""
    missing = [c for c in baseline_checks if c not in lines]
    if missing:
        raise InfercheckError(f"the code-map run recorded nothing for its baseline ({', '.join(missing)})")
    base: dict[str, set[int]] = {}
    for check in baseline_checks:
        for file, executed in lines[check].items():
            base.setdefault(file, set()).update(executed)
    ran = [lines.get(check, {}) for check in app_checks]
    for file in set().union(*ran) if ran else set():  # what every app runs is the common path too (the
        every = set.intersection(*(r.get(file, set()) for r in ran))  # shutdown of the engine before it)
        base.setdefault(file, set()).update(every)

    def functions(files: dict[str, set[int]], minus: dict[str, set[int]]) -> frozenset[str]:
        return frozenset(f"{file}::{name}" for file, executed in files.items() if file in sources
                         for name in functions_at(sources[file], executed - minus.get(file, set())))

    reach = {app: functions(lines.get(check, {}), base) for check, app in app_checks.items()}
    return CodeMap(engine, functions(base, {}), reach, definitions)


def changed_lines(patch_text: str) -> dict[str, set[int]]:
    """File -> the lines of its old side that the patch changes: each removed line, and for a pure
    insertion the old line it follows (a function gaining lines is a changed function). New files
    have none (no function of the engine runs them yet)."""
    out: dict[str, set[int]] = {}
    old_file, file, old_line = None, None, 0
    for line in patch_text.splitlines():
        if line.startswith("--- "):
            match = OLD_HEADER.match(line)
            old_file = match.group(1) if match else None
            continue
        if line.startswith("+++ "):
            file = old_file if old_file != "/dev/null" else None  # a new file: no old side to name
            continue
        header = HUNK_HEADER.match(line)
        if header:
            old_line = int(header.group(1))
            continue
        if file is None or not line or line[0] not in " -+":
            continue
        if line[0] == " ":
            old_line += 1
        elif line[0] == "-":
            out.setdefault(file, set()).add(old_line)
            old_line += 1
        else:
            out.setdefault(file, set()).add(max(old_line - 1, 1))
    return out


def changed_functions(patch_text: str, sources: dict[str, str]) -> list[str]:
    """"file::function" of each function of the old files holding a changed line (pure)."""
    out = set()
    for file, lines in changed_lines(patch_text).items():
        if file in sources:
            out |= {f"{file}::{name}" for name in functions_at(sources[file], lines)}
    return sorted(out)
