"""Suites as data: YAML under suites/ (parity, accuracy) and symptom specs, loaded into records
(infercheck/specs.py) with their defaults at load time."""

from __future__ import annotations

from pathlib import Path

from infercheck.errors import InfercheckError
from infercheck.hub import hub_reachable
from infercheck.names import PROMPTLESS_SYMPTOMS, SuiteKind, SymptomKind
from infercheck.paths import SUITES_DIR
from infercheck.specs import Suite, SymptomFile, SymptomSpec
from infercheck.yamlio import parse_record, read_yaml


def load_suite(path: Path, kind: SuiteKind) -> Suite:
    data = read_yaml(path)
    if data.get("kind", kind) != kind:
        raise InfercheckError(f"{path}: kind {data['kind']!r} in a {kind} folder")
    name = f"{kind}/{data.get('name', path.stem)}"
    return parse_record(Suite, {**data, "name": name, "kind": kind}, path)


def load_suites(root: Path = SUITES_DIR) -> dict[str, Suite]:
    suites = {}
    for kind in SuiteKind:
        for path in sorted((root / kind).glob("*.yaml")):
            suite = load_suite(path, kind)
            suites[suite.name] = suite
    return suites


def select_suites(model_name: str, names: list[str] | None, root: Path = SUITES_DIR) -> list[Suite]:
    """Named suites (`parity/addition-long`, `addition-long`, or a kind: `parity`), else every
    non-standard suite that applies to the model. Standard hub tasks need a reachable hub."""
    suites = load_suites(root)
    if not names:
        return [s for s in suites.values() if s.applies_to(model_name) and not s.standard]
    chosen = _named(suites, names)
    standard = [s.name for s in chosen if s.standard]
    if standard and not hub_reachable():
        raise InfercheckError(f"{', '.join(standard)}: standard lm-eval task(s) download their dataset from the "
                              f"Hugging Face hub, which is not reachable from here (offline); run them where the hub "
                              f"is reachable, or use the bundled suites")
    return chosen


def _named(suites: dict[str, Suite], names: list[str]) -> list[Suite]:
    chosen: list[Suite] = []
    for name in names:
        matches = [s for s in suites.values() if name in (s.name, s.name.split("/", 1)[1], s.kind)]
        if not matches:
            raise InfercheckError(f"unknown suite {name!r} (known: {', '.join(suites)})")
        chosen.extend(m for m in matches if m not in chosen)
    return chosen


def load_symptom(path: Path) -> SymptomSpec:
    spec = parse_record(SymptomFile, read_yaml(path), path)
    criterion = spec.criterion
    kind_name = criterion.type or (SymptomKind.PYTEST if spec.pytest else None)
    if kind_name not in list(SymptomKind):
        raise InfercheckError(f"{path}: criterion.type must be one of {', '.join(SymptomKind)}")
    kind = SymptomKind(kind_name)
    if kind == SymptomKind.ACCURACY and criterion.min is None:
        raise InfercheckError(f"{path}: an accuracy criterion needs `min`")
    if kind == SymptomKind.PYTEST and not spec.pytest:
        raise InfercheckError(f"{path}: a pytest symptom needs `pytest` (a node id)")
    if kind == SymptomKind.APP:
        from infercheck.apps import load_apps

        known = load_apps()
        if criterion.app not in known:
            raise InfercheckError(f"{path}: an app criterion needs `app`, one of {', '.join(known)} "
                                  f"(got {criterion.app!r})")
    if kind not in PROMPTLESS_SYMPTOMS and not spec.prompts:
        raise InfercheckError(f"{path}: a symptom needs `prompts` (a prompt-set spec)")
    return SymptomSpec(description=spec.description, kind=kind, prompts=dict(spec.prompts),
                       max_tokens=spec.max_tokens, engine_args=dict(spec.engine_args), sampling=dict(spec.sampling),
                       threshold=criterion.min, pytest=spec.pytest, affected=spec.affected, path=str(path),
                       app=criterion.app)
