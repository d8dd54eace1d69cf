"""Suites as data: YAML under suites/ (parity, accuracy) and symptom specs, loaded into records."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from infercheck.errors import InfercheckError
from infercheck.hub import hub_reachable
from infercheck.paths import SUITES_DIR

KINDS = ("parity", "accuracy")
SYMPTOM_KINDS = ("accuracy", "parity", "sane_output", "pytest", "app")
PROMPTLESS_SYMPTOMS = ("pytest", "app")


@dataclass(frozen=True)
class Suite:
    name: str  # "parity/addition-long"
    kind: str
    description: str
    spec: dict[str, Any]
    models: tuple[str, ...] = ()  # bundled models it applies to; empty = any
    standard: bool = False  # a standard lm-eval task that needs the hub

    def applies_to(self, model_name: str) -> bool:
        return not self.models or model_name in self.models


@dataclass(frozen=True)
class SymptomSpec:
    description: str
    kind: str  # one of SYMPTOM_KINDS
    prompts: dict[str, Any] = field(default_factory=dict)
    max_tokens: int = 8
    engine_args: dict[str, Any] = field(default_factory=dict)
    sampling: dict[str, Any] = field(default_factory=dict)
    threshold: float | None = None  # accuracy criterion: at least this
    pytest: str | None = None  # node id, run in the variant's env
    affected: tuple[str, ...] = ()  # suites measuring quality in the affected area
    path: str = ""
    app: str | None = None  # kind "app": the neighbouring application whose check is the reproduction


def read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise InfercheckError(f"file not found: {path}") from None
    except (OSError, yaml.YAMLError) as exc:
        raise InfercheckError(f"cannot read {path}: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise InfercheckError(f"{path}: expected a YAML mapping")
    return data


def load_suites(root: Path = SUITES_DIR) -> dict[str, Suite]:
    suites = {}
    for kind in KINDS:
        for path in sorted((root / kind).glob("*.yaml")):
            data = read_yaml(path)
            name = f"{kind}/{data.get('name', path.stem)}"
            suites[name] = Suite(name, kind, str(data.get("description", "")), data,
                                 tuple(data.get("models") or ()), bool(data.get("standard", False)))
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
    data = read_yaml(path)
    criterion = data.get("criterion") or {}
    kind = criterion.get("type") or ("pytest" if data.get("pytest") else None)
    if kind not in SYMPTOM_KINDS:
        raise InfercheckError(f"{path}: criterion.type must be one of {', '.join(SYMPTOM_KINDS)}")
    if kind == "accuracy" and criterion.get("min") is None:
        raise InfercheckError(f"{path}: an accuracy criterion needs `min`")
    if kind == "app":
        from infercheck.apps import load_apps

        known = load_apps()
        if criterion.get("app") not in known:
            raise InfercheckError(f"{path}: an app criterion needs `app`, one of {', '.join(known)} "
                                  f"(got {criterion.get('app')!r})")
    if kind not in PROMPTLESS_SYMPTOMS and not data.get("prompts"):
        raise InfercheckError(f"{path}: a symptom needs `prompts` (a prompt-set spec)")
    return SymptomSpec(
        description=str(data.get("description", "")), kind=kind, prompts=dict(data.get("prompts") or {}),
        max_tokens=int(data.get("max_tokens", 8)), engine_args=dict(data.get("engine_args") or {}),
        sampling=dict(data.get("sampling") or {}), threshold=criterion.get("min"), pytest=data.get("pytest"),
        affected=tuple(data.get("affected") or ()), path=str(path), app=criterion.get("app"),
    )
