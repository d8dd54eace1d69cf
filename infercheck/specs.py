"""The YAML specs as records: suites, symptoms, apps and cases (docs/design.md, "Records").

Loaders (suites.py, apps.py, cases.py) read the files and build these with `yamlio.parse_record`,
so every default is filled in at load time and a wrong key or type is a one-line error naming the
file and the key. Records only: no I/O here, nothing imported above the names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infercheck.names import CheckKind, SuiteKind, SymptomKind

DEFAULT_TOP_K = 20


@dataclass(frozen=True)
class Suite:
    """suites/parity/*.yaml and suites/accuracy/*.yaml."""

    name: str  # "parity/addition-long" (the file's `name` is the part after the kind)
    kind: SuiteKind
    description: str = ""
    models: tuple[str, ...] = ()  # bundled models it applies to; empty = any
    standard: bool = False  # a standard lm-eval task that needs the hub (or a local copy of `dataset`)
    dataset: str = ""  # a standard task's hub dataset, whose local copy lets it run offline
    # parity: greedy generation re-scored by the reference
    prompts: dict[str, Any] = field(default_factory=dict)  # a prompt-set spec (prompts.build_prompts)
    max_tokens: int = 8
    top_k: int = DEFAULT_TOP_K
    engine_args: dict[str, Any] = field(default_factory=dict)
    # accuracy: an lm-eval task
    task: str = ""
    metric: str = ""
    num_fewshot: int | None = None
    limit: int | None = None
    tolerance: float = 0.05

    def applies_to(self, model_name: str) -> bool:
        return not self.models or model_name in self.models


@dataclass(frozen=True)
class Criterion:
    """A symptom's pass rule: `type` and what that type needs."""

    type: str | None = None  # a SymptomKind (checked by the loader, which names the choices)
    min: float | None = None  # accuracy: at least this exact match
    app: str | None = None  # app: the neighbouring application whose check is the reproduction


@dataclass(frozen=True)
class SymptomFile:
    """A symptom spec file as written (see SymptomSpec for the record the pipeline uses)."""

    description: str = ""
    criterion: Criterion = field(default_factory=Criterion)
    prompts: dict[str, Any] = field(default_factory=dict)
    max_tokens: int = 8
    engine_args: dict[str, Any] = field(default_factory=dict)
    sampling: dict[str, Any] = field(default_factory=dict)
    pytest: str | None = None  # node id, relative to the symptom file's folder
    affected: tuple[str, ...] = ()


@dataclass(frozen=True)
class SymptomSpec:
    description: str
    kind: SymptomKind
    prompts: dict[str, Any] = field(default_factory=dict)
    max_tokens: int = 8
    engine_args: dict[str, Any] = field(default_factory=dict)
    sampling: dict[str, Any] = field(default_factory=dict)
    threshold: float | None = None  # accuracy criterion: at least this
    pytest: str | None = None  # node id, run in the variant's env
    affected: tuple[str, ...] = ()  # suites and apps measuring quality in the affected area
    path: str = ""
    app: str | None = None  # kind "app": the neighbouring application whose check is the reproduction


@dataclass(frozen=True)
class App:
    """suites/apps/*.yaml and suites/oracles/*.yaml: engine args + a workload + comparators + what to
    record. An oracle is an app whose workload enumerates a feature's parameters (docs/design.md,
    "Oracles"); it differs only in its kind, which names its check."""

    name: str  # "agent-multiturn" (its check is "app/agent-multiturn"; an oracle's "oracle/<name>")
    workload: dict[str, Any]  # `type` (apps.WORKLOADS) and that type's parameters
    compare: tuple[str, ...] = ()  # comparator names (checks/comparators.py)
    description: str = ""
    criterion: str = ""
    model: str | None = None  # a bundled model it is pinned to; None = the run's model
    also_on: tuple[str, ...] = ()  # bundled models it also runs on, each as the app "<name>@<model>"
    variant_of: str | None = None  # for such an "<name>@<model>" app: the app (and file) it runs
    engine_args: dict[str, Any] = field(default_factory=dict)
    record: tuple[str, ...] = ()  # throughput / hit_rate / preemptions
    options: dict[str, dict[str, Any]] = field(default_factory=dict)  # comparator -> its YAML options
    kind: CheckKind = CheckKind.APP  # APP or ORACLE: the folder it was loaded from

    @property
    def check_name(self) -> str:
        return f"{self.kind}/{self.name}"

    def options_for(self, comparator: str) -> dict[str, Any]:
        return dict(self.options.get(comparator) or {})


@dataclass(frozen=True)
class Candidate:
    name: str
    patch: Path
    expected: str
    why: str = ""  # one line: what measurement shows it
    quick: bool = False  # in the fast subset `infercheck bench --quick` (and CI) runs


@dataclass(frozen=True)
class Case:
    id: str
    folder: Path
    model: str
    base_patches: tuple[Path, ...]
    symptom: Path | None
    candidates: tuple[Candidate, ...]
    suites: tuple[str, ...] = ()
    apps: tuple[str, ...] | None = None  # None: the neighbour map decides per candidate
    area: str = ""  # the code area the bug lives in (one per case in the bundled benchmark)
    bug: str = ""

    def candidate_for(self, patch: Path) -> Candidate | None:
        resolved = Path(patch).resolve()
        return next((c for c in self.candidates if c.patch.resolve() == resolved), None)
