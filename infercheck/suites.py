"""Suites as data: YAML under suites/ (parity, accuracy) and symptom specs, loaded into records
(infercheck/specs.py) with their defaults at load time."""

from __future__ import annotations

from pathlib import Path

from infercheck.errors import InfercheckError
from infercheck.hub import cached_on_disk, hub_reachable
from infercheck.models.zoo import carries_general_text
from infercheck.names import PROMPTLESS_SYMPTOMS, SuiteKind, SymptomKind
from infercheck.paths import SUITES_DIR
from infercheck.prompts import needs_general_tokenizer
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


def carried(suite: Suite, model_name: str) -> bool:
    """Can the model's tokenizer carry the suite's prompts (prompts.GENERAL_SETS need a general one)?"""
    return not needs_general_tokenizer(suite.prompts) or carries_general_text(model_name)


def fits(suite: Suite, model_name: str) -> bool:
    """Does the suite run on the model by default: one of its models (none listed: any) whose
    tokenizer carries its prompts."""
    return suite.applies_to(model_name) and carried(suite, model_name)


def select_suites(model_name: str, names: list[str] | None, root: Path = SUITES_DIR) -> list[Suite]:
    """Named suites (`parity/addition-long`, `addition-long`, or a kind: `parity`, which means the
    kind's suites that fit the model), else every non-standard suite that fits the model. Standard
    hub tasks need a reachable hub; a suite whose prompts the model's tokenizer cannot carry is an
    error when named."""
    suites = load_suites(root)
    if not names:
        return [s for s in suites.values() if fits(s, model_name) and not s.standard]
    chosen = _named(suites, names, model_name)
    uncarried = [s.name for s in chosen if not carried(s, model_name)]
    if uncarried:
        raise InfercheckError(f"{', '.join(uncarried)}: general text, which the bundled model {model_name}'s "
                              f"character vocabulary cannot carry (these suites are for other models)")
    standard = [s for s in chosen if s.standard]
    missing = [s.name for s in standard if not (s.dataset and cached_on_disk(s.dataset, "datasets"))]
    if missing and not hub_reachable():
        raise InfercheckError(f"{', '.join(missing)}: standard lm-eval task(s) download their dataset from the "
                              f"Hugging Face hub, which is not reachable from here (offline), and the local hub cache "
                              f"has no copy; run them where the hub is reachable, or use the bundled suites")
    return chosen


def suites_for_model(names: list[str], model_name: str, root: Path = SUITES_DIR) -> list[str]:
    """A case's suite names kept for another model than the case's: kinds (expanded to what fits
    the model) and the named suites that fit it; the case model's own (its addition accuracy) drop."""
    suites = load_suites(root)
    return [n for n in names if n in list(SuiteKind) or any(fits(s, model_name) for s in _named(suites, [n], model_name))]


def _named(suites: dict[str, Suite], names: list[str], model_name: str) -> list[Suite]:
    chosen: list[Suite] = []
    for name in names:
        matches = [s for s in suites.values() if name in (s.name, s.name.split("/", 1)[1])]
        matches = matches or [s for s in suites.values() if s.kind == name and fits(s, model_name)]
        if not matches and name not in list(SuiteKind):
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
