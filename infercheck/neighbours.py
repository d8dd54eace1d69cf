"""Which neighbouring applications and suites a patch puts at risk, and why: the glob map
(suites/neighbours.yaml, human-readable reasons, the fallback for files the map has not seen) and
the recorded code map (suites/codemap/, the apps that run a function the patch changes; see
infercheck/codemap.py and docs/design.md, "Code-path evidence")."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from infercheck.apps import load_apps, select_apps
from infercheck.codemap import CodeMap, changed_functions, codemap_path, load_codemap
from infercheck.engine_test_selection import ENGINE_PACKAGE, EngineTestSelection, select_tests
from infercheck.engine_test_tree import EngineTestTree, tree_test_sources
from infercheck.errors import InfercheckError
from infercheck.names import APP_LIKE
from infercheck.paths import SUITES_DIR
from infercheck.specs import App
from infercheck.yamlio import read_yaml


@dataclass
class Selection:
    """An app or suite at risk, with the touched files and rules that selected it."""

    name: str
    kind: str  # "app" | "oracle" | "suite"
    reasons: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    specificity: int = 0  # length of the most specific matching glob: higher is more directly touched


def glob_regex(pattern: str) -> re.Pattern[str]:
    """fnmatch-style glob where `*` stays inside a folder and `**` crosses folders."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")


CODEMAP_SPECIFICITY = 1000  # a function the app runs is more direct than any glob


@dataclass(frozen=True)
class CodeMapHits:
    """What the code map says of a patch: the functions it changes, app name -> those of them the
    app reaches, and a note when the map could not be used (no map for this engine, a stale entry)."""

    changed: tuple[str, ...] = ()
    apps: dict[str, list[str]] = field(default_factory=dict)
    note: str = ""


def code_map_hits(patch_text: str, files: list[str], source_root: Path, codemap: CodeMap | None,
                  label: str) -> CodeMapHits:
    """The code map's view of a patch whose old files are under source_root (the engine tree the
    patch applies to); label names the map in the note."""
    sources = {f: (source_root / f).read_text() for f in files
               if f.endswith(".py") and (source_root / f).is_file()}
    changed = changed_functions(patch_text, sources)
    if codemap is None:
        return CodeMapHits(tuple(changed), note=f"no code map for this engine ({label}): the glob map alone selects")
    apps = codemap.apps_running(changed)
    known = load_apps()
    stale = codemap.stale({name: digest for name, digest in codemap.definitions.items() if name in known})
    note = f"code map {label}" + (f" (recorded before the last edit of {', '.join(stale)})" if stale else "")
    return CodeMapHits(tuple(changed), apps, note)


def engine_source_root(engine_src: Path | None = None) -> Path:
    """Where the old side of a patch's engine files is read: an --engine-src checkout, else the
    installed package's folder."""
    from infercheck.build.tree import find_installed_engine

    return Path(engine_src).expanduser().resolve() if engine_src else find_installed_engine().package_dir.parent


def installed_code_map_hits(patch_text: str, files: list[str], engine_src: Path | None = None) -> CodeMapHits:
    """code_map_hits against the installed engine's map and sources (or an --engine-src checkout's)."""
    from infercheck.build.tree import find_installed_engine

    engine = find_installed_engine()
    path = codemap_path(engine.distribution, engine.version)
    return code_map_hits(patch_text, files, engine_source_root(engine_src), load_codemap(path), path.name)


def select_engine_tests(patch_text: str, files: list[str], tree: EngineTestTree,
                        engine_src: Path | None = None) -> EngineTestSelection:
    """The engine's own tests that judge a patch (engine_test_selection.py's contract), from the
    test tree and the engine sources the patch applies to."""
    root = engine_source_root(engine_src)
    sources = {f: (root / f).read_text(errors="replace") for f in files
               if f.startswith(f"{ENGINE_PACKAGE}/") and f.endswith(".py") and (root / f).is_file()}
    return select_tests(changed_functions(patch_text, sources), sources, tree_test_sources(tree))


def select_neighbours(touched: list[str], path: Path = SUITES_DIR / "neighbours.yaml",
                      hits: CodeMapHits | None = None) -> list[Selection]:
    """Apps, oracles and suites at risk, most directly touched first (the code map's before the
    glob map's); the smoke set last."""
    data = read_yaml(path)
    chosen: dict[tuple[str, str], Selection] = {}
    known = load_apps()
    for app, functions in (hits.apps if hits else {}).items():
        if app not in known:
            continue
        sel = chosen.setdefault((str(known[app].kind), app), Selection(app, str(known[app].kind)))
        sel.specificity = CODEMAP_SPECIFICITY
        sel.reasons.append(f"code map: runs {', '.join(functions[:3])}" + (" …" if len(functions) > 3 else ""))
        sel.files.extend(f for f in dict.fromkeys(fn.split("::")[0] for fn in functions) if f not in sel.files)
    for rule in data.get("rules") or []:
        try:
            globs, name, why = list(rule["paths"]), rule["name"], rule["why"]
        except KeyError as exc:
            raise InfercheckError(f"{path}: a rule lacks {exc}") from None
        for file in touched:
            matching = [g for g in globs if glob_regex(g).match(file)]
            if not matching:
                continue
            spec = max(len(g.replace("*", "")) for g in matching)
            for kind, names in (("app", rule.get("apps") or []), ("oracle", rule.get("oracles") or []),
                                ("suite", rule.get("suites") or [])):
                for target in names:
                    sel = chosen.setdefault((kind, target), Selection(target, kind))
                    sel.specificity = max(sel.specificity, spec)
                    if f"{name}: {why}" not in sel.reasons:
                        sel.reasons.append(f"{name}: {why}")
                    if file not in sel.files:
                        sel.files.append(file)
    ordered = sorted(chosen.values(), key=lambda s: (-s.specificity, s.kind, s.name))
    smoke = data.get("smoke") or {}
    for target in smoke.get("suites") or []:
        if ("suite", target) not in chosen:
            ordered.append(Selection(target, "suite", [f"smoke: {smoke.get('why', 'always run')}"]))
    return ordered


def choose_apps(touched: list[str], requested: list[str] | None, symptom_app: str | None = None,
                hits: CodeMapHits | None = None) -> tuple[list[App], dict[str, str]]:
    """The apps and oracles a validate runs, with why: the symptom's own app first, then named ones
    (`all`, `none`, or names), else the neighbour maps' selection for the touched files."""
    apps, reasons = chosen_apps(touched, requested, hits)
    if symptom_app is not None:
        apps = [load_apps()[symptom_app]] + [a for a in apps if a.name != symptom_app]
        reasons[symptom_app] = "the reported symptom is this application failing"
    return apps, reasons


def chosen_apps(touched: list[str], requested: list[str] | None,
                hits: CodeMapHits | None = None) -> tuple[list[App], dict[str, str]]:
    if requested is not None:
        names = [n for r in requested for n in r.split(",") if n.strip()]
        if names == ["none"]:
            return [], {}
        if names == ["all"]:
            names = list(load_apps())
        apps = select_apps(names)
        return apps, {a.name: "named with --apps" for a in apps}
    selected = [s for s in select_neighbours(touched, hits=hits) if s.kind in APP_LIKE]  # apps and oracles run as apps
    known = load_apps()
    apps = [known[s.name] for s in selected if s.name in known]
    return apps, {s.name: f"touches {', '.join(s.files[:3])} — " + " | ".join(s.reasons) for s in selected}
