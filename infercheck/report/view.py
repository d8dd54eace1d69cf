"""Presentation helpers shared by every report format: formatting, verdict colours, the three
questions answered from the checks, and the per-check one-line summary. Pure: no I/O."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from infercheck.checks.records import (FLAG_ERROR, FLAG_NOT_RESTORED, FLAG_REGRESSED, FLAG_SYMPTOM_FAILS,
                                       FLAG_UNDERPOWERED, FLAG_UNSTABLE, FLAG_WORKAROUND, VARIANTS, CheckResult,
                                       ValidationRun)

# Check flags that leave a question undecided rather than answered.
UNDECIDED_FLAGS = (FLAG_UNDERPOWERED, FLAG_UNSTABLE)
VERDICT_CLASS = {"RESOLVED": "good", "CLEAN": "good", "SYMPTOM_ONLY": "warn", "WORKAROUND": "warn",
                 "INCONCLUSIVE": "warn", "NOT_FIXED": "bad", "COLLATERAL": "bad", "ERROR": "bad"}


def verdict_class(headline: str | None) -> str:
    """good / warn / bad for a headline (ERROR:<stage> counts as ERROR); unknown otherwise."""
    return VERDICT_CLASS.get((headline or "").split(":", 1)[0], "unknown")


def expected_matches(expected: str | None, headline: str) -> bool | None:
    """None when nothing was expected; a bare "ERROR" matches any ERROR:<stage>."""
    if not expected:
        return None
    return expected == headline or (expected == "ERROR" and headline.startswith("ERROR:"))


def fmt(value: Any) -> str:
    """A value for a table cell: short floats, '—' for missing, containers item by item."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return str(value) if math.isinf(value) or math.isnan(value) else f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(fmt(x) for x in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {fmt(x)}" for k, x in value.items()) + "}"
    return str(value)


def fmt_pass(passed: bool | None) -> str:
    return {True: "pass", False: "FAIL"}.get(passed, "n/a")


def fmt_ci(ci: Any) -> str:
    return f"[{fmt(ci[0])}, {fmt(ci[1])}]" if ci else "—"


def fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    minutes, rest = divmod(float(seconds), 60)
    return f"{int(minutes)} min {rest:04.1f} s" if minutes else f"{rest:.1f} s"


def flag_messages(run: ValidationRun, check: str | None) -> list[str]:
    """Messages of the verdict flags raised by one check (None: the run-level flags)."""
    return [f"{f.code}: {f.message}" for f in run.verdict.flags if f.check == check]


def observation_cell(check: CheckResult, variant: str) -> str:
    """'0.912 pass', 'error (timeout)' or '—' for a variant that did not take part."""
    obs = check.observation(variant)
    if obs is None:
        return "—"
    return f"error ({obs.error})" if obs.error else f"{fmt(obs.value)} {fmt_pass(obs.passed)}"


def check_summary(check: CheckResult) -> dict[str, Any]:
    """The per-check record in verdict.json, with a one-line text form."""
    variants = {}
    for variant in VARIANTS:
        obs = check.observation(variant)
        variants[variant] = None if obs is None else {"passed": obs.passed, "value": obs.value, "error": obs.error}
    line = f"{check.name} [{check.kind}] " + " | ".join(f"{v} {observation_cell(check, v)}" for v in VARIANTS)
    if check.flags:
        line += " — " + ", ".join(check.flags)
    return {"name": check.name, "kind": check.kind, "affected": check.affected, **variants,
            "flags": list(check.flags), "line": line}


def verdict_record(run: ValidationRun) -> dict[str, Any]:
    """verdict.json: the headline and everything the reports index lists."""
    v = run.verdict
    return {"run_id": run.run_id, "started": run.started, "patch": run.patch.name, "case": run.case,
            "expected": run.expected, "expected_matches": expected_matches(run.expected, v.headline),
            "headline": v.headline, "exit_code": v.exit_code, "has_symptom": v.has_symptom,
            "elapsed_s": run.elapsed_s, "model": run.model, "engine": run.engine,
            "flags": [{"code": f.code, "check": f.check, "message": f.message} for f in v.flags],
            "checks": [check_summary(c) for c in run.checks]}


@dataclass
class Answer:
    question: str
    status: str  # good / warn / bad / na
    line: str  # the one-line answer
    checks: list[CheckResult] = field(default_factory=list)  # the evidence


def _names(checks: list[CheckResult]) -> str:
    return ", ".join(c.name for c in checks)


def _with(checks: list[CheckResult], *codes: str) -> list[CheckResult]:
    return [c for c in checks if any(code in c.flags for code in codes)]


def _errored(checks: list[CheckResult]) -> list[CheckResult]:
    return [c for c in checks if FLAG_ERROR in c.flags or c.patched.error]


def _symptom(checks: list[CheckResult]) -> Answer:
    q = "Is the symptom gone?"
    if not checks:
        return Answer(q, "na", "Not asked: no symptom spec for this patch.")
    if bad := _errored(checks):
        return Answer(q, "bad", f"Unknown: {_names(bad)} could not run on patched.", checks)
    if bad := [c for c in checks if FLAG_SYMPTOM_FAILS in c.flags or c.patched.passed is False]:
        return Answer(q, "bad", f"No: {_names(bad)} still fails on patched.", checks)
    if all(c.patched.passed for c in checks):
        was = "failed on base" if all(c.base.passed is False for c in checks) else "see base column"
        return Answer(q, "good", f"Yes: {_names(checks)} passes on patched ({was}).", checks)
    return Answer(q, "warn", f"Unknown: {_names(checks)} has no pass/fail on patched.", checks)


def _quality(checks: list[CheckResult], everything: list[CheckResult]) -> Answer:
    q = "Is quality restored?"
    if bad := _with(checks, FLAG_NOT_RESTORED):
        return Answer(q, "bad", f"No: {_names(bad)} still differs from the reference.", checks)
    if bad := _errored(checks):
        return Answer(q, "bad", f"Unknown: {_names(bad)} could not run on patched.", checks)
    if bypass := _with(everything, FLAG_WORKAROUND):
        return Answer(q, "warn", f"Only by a workaround: {_names(bypass)} shows the feature disabled or "
                      "bypassed.", checks)
    if weak := _with(checks, *UNDECIDED_FLAGS):
        return Answer(q, "warn", f"Undecided: {_names(weak)} lacks power or is unstable.", checks)
    if not checks:
        return Answer(q, "warn", "Not measured: no quality check covers the affected area.")
    if bad := [c for c in checks if c.patched.passed is False]:
        return Answer(q, "bad", f"No: {_names(bad)} fails on patched.", checks)
    return Answer(q, "good", f"Yes: {_names(checks)} matches the reference.", checks)


def _collateral(checks: list[CheckResult], everything: list[CheckResult]) -> Answer:
    q = "Did anything else break?"
    if bad := _with(everything, FLAG_REGRESSED) or _errored(checks):
        return Answer(q, "bad", f"Yes: {_names(bad)} passed on base and fails (or errors) on patched.", checks)
    if not checks:
        return Answer(q, "warn", "Not measured: no neighbouring check ran.")
    if weak := _with(checks, *UNDECIDED_FLAGS):
        return Answer(q, "warn", f"Undecided: {_names(weak)} lacks power or is unstable.", checks)
    return Answer(q, "good", f"No: {len(checks)} neighbouring check(s) hold.", checks)


def answers(run: ValidationRun) -> list[Answer]:
    """The three questions, each answered from its group: symptom checks, quality checks in the
    affected area, and the rest (neighbouring applications)."""
    symptom = [c for c in run.checks if c.kind == "symptom"]
    quality = [c for c in run.checks if c.kind != "symptom" and c.affected]
    rest = [c for c in run.checks if c.kind != "symptom" and not c.affected]
    return [_symptom(symptom), _quality(quality, run.checks), _collateral(rest, run.checks)]
