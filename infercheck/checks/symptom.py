"""The symptom check: the bug report's reproduction, fail on base → pass on patched."""

from __future__ import annotations

import math
from typing import Any

from infercheck.checks.parity_check import parity_check
from infercheck.checks.records import FLAG_ERROR, FLAG_NOT_REPRODUCED, FLAG_SYMPTOM_FAILS, CheckResult, Observation
from infercheck.checks.stats import wilson_interval
from infercheck.prompts import Prompt
from infercheck.run.job import RequestResult
from infercheck.suites import SymptomSpec

NAME = "symptom"


def first_line(text: str) -> str:
    return text.split("\n")[0]


def accuracy_observation(variant: str, results: list[RequestResult], prompts: dict[str, Prompt],
                         threshold: float) -> Observation:
    scored = [(first_line(r.text) == prompts[r.id].answer) for r in results if prompts[r.id].answer is not None]
    n, right = len(scored), sum(scored)
    value = right / n if n else None
    wrong = [f"{prompts[r.id].text[-12:]!r} -> {first_line(r.text)!r} (want {prompts[r.id].answer!r})"
             for r in results if prompts[r.id].answer is not None and first_line(r.text) != prompts[r.id].answer]
    return Observation(variant, value, value is not None and value >= threshold, wilson_interval(right, n), n,
                       {"wrong_examples": wrong[:3]} if wrong else {})


def insane(result: RequestResult) -> str | None:
    """Why an output is not sane (empty, non-finite logprobs, a degenerate loop), or None."""
    if not result.output_ids:
        return "empty output"
    if any(not math.isfinite(lp) for lp in result.chosen_logprobs or []):
        return "NaN/inf logprob"
    ids = result.output_ids
    if len(ids) >= 8 and max(ids.count(t) for t in set(ids)) / len(ids) > 0.8:
        return "one token repeated"
    return None


def sane_observation(variant: str, results: list[RequestResult]) -> Observation:
    problems = {r.id: why for r in results if (why := insane(r))}
    n = len(results)
    return Observation(variant, (n - len(problems)) / n if n else None, n > 0 and not problems, None, n,
                       {"problems": dict(list(problems.items())[:5])} if problems else {})


def symptom_flags(base: Observation, patched: Observation) -> list[str]:
    flags = []
    if not patched.passed:
        flags.append(FLAG_SYMPTOM_FAILS)
    if base.passed:
        flags.append(FLAG_NOT_REPRODUCED)
    return flags


def symptom_check(spec: SymptomSpec, engine: dict[str, list[RequestResult]],
                  references: dict[str, dict[str, RequestResult]], prompts: dict[str, Prompt],
                  profile: dict[str, float], pytest_outcomes: dict[str, Any] | None = None) -> CheckResult:
    why = f"the reported symptom ({spec.path})"
    if spec.kind == "parity":
        check = parity_check(NAME, "symptom", engine, references, profile, True,
                             {k: p.text for k, p in prompts.items()}, why)
        check.flags = symptom_flags(check.base, check.patched)
        check.criterion = f"{spec.description}: {check.criterion}"
        return check
    if spec.kind == "accuracy":
        obs = {v: accuracy_observation(v, engine[v], prompts, float(spec.threshold)) for v in ("base", "patched")}
        criterion = f"{spec.description}: exact match >= {spec.threshold:g} on {len(engine['base'])} prompts"
    elif spec.kind == "sane_output":
        obs = {v: sane_observation(v, engine[v]) for v in ("base", "patched")}
        criterion = f"{spec.description}: every output non-empty, finite logprobs, no degenerate repetition"
    else:
        outcomes = pytest_outcomes or {}
        obs = {v: Observation(v, None, outcomes.get(v, {}).get("passed"), None, None,
                              {"tail": outcomes.get(v, {}).get("tail", "")}) for v in ("base", "patched")}
        criterion = f"{spec.description}: pytest {spec.pytest} fails on base and passes on patched"
    return CheckResult(NAME, "symptom", spec.kind, criterion, True, obs["base"], obs["patched"], None,
                       symptom_flags(obs["base"], obs["patched"]), {}, [], why)


def app_symptom_check(spec: SymptomSpec, app: CheckResult) -> CheckResult:
    """A symptom that is a neighbouring application failing: its app check, read as fail on base →
    pass on patched. The app's own section keeps the detail (runtime, examples). A crash on base is
    the symptom reproducing; a crash on patched only is ERROR (DESIGN), on both the symptom remaining."""
    flags = [FLAG_ERROR] if app.patched.error and not app.base.error else symptom_flags(app.base, app.patched)
    return CheckResult(NAME, "symptom", "app", f"{spec.description}: {app.name} ({app.criterion}) fails on base "
                       f"and passes on patched", True, app.base, app.patched, app.reference, flags,
                       dict(app.comparison), list(app.examples), f"the reported symptom ({spec.path})")
