"""The symptom check: the bug report's reproduction, fail on base → pass on patched."""

from __future__ import annotations

import math

from infercheck.checks.noise_floor import Tolerance
from infercheck.checks.parity_check import parity_check
from infercheck.checks.stats import wilson_interval
from infercheck.names import ENGINE_VARIANTS, CheckFlag, CheckKind, SymptomKind, Variant
from infercheck.payloads import AnswerDetail, PytestDetail, SaneOutputDetail
from infercheck.prompts import Prompt
from infercheck.records import CheckResult, Observation
from infercheck.run.job import RequestResult
from infercheck.run.store import PytestOutcome
from infercheck.specs import SymptomSpec

NAME = "symptom"


def first_line(text: str) -> str:
    return text.split("\n")[0]


def accuracy_observation(variant: Variant, results: list[RequestResult], prompts: dict[str, Prompt],
                         threshold: float) -> Observation:
    scored = [(first_line(r.text) == prompts[r.id].answer) for r in results if prompts[r.id].answer is not None]
    n, right = len(scored), sum(scored)
    value = right / n if n else None
    wrong = [f"{prompts[r.id].text[-12:]!r} -> {first_line(r.text)!r} (want {prompts[r.id].answer!r})"
             for r in results if prompts[r.id].answer is not None and first_line(r.text) != prompts[r.id].answer]
    return Observation(variant, value, value is not None and value >= threshold, wilson_interval(right, n), n,
                       AnswerDetail(wrong[:3]))


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


def sane_observation(variant: Variant, results: list[RequestResult]) -> Observation:
    problems = {r.id: why for r in results if (why := insane(r))}
    n = len(results)
    return Observation(variant, (n - len(problems)) / n if n else None, n > 0 and not problems, None, n,
                       SaneOutputDetail(dict(list(problems.items())[:5])))


def pytest_observation(variant: Variant, outcome: PytestOutcome | None) -> Observation:
    if outcome is None:
        return Observation(variant, error="the pytest symptom did not run")
    return Observation(variant, None, outcome.passed, None, None, PytestDetail(outcome.tail, outcome.returncode))


def symptom_flags(base: Observation, patched: Observation) -> list[CheckFlag]:
    flags = []
    if not patched.passed:
        flags.append(CheckFlag.SYMPTOM_FAILS)
    if base.passed:
        flags.append(CheckFlag.NOT_REPRODUCED)
    return flags


def symptom_check(spec: SymptomSpec, engine: dict[Variant, list[RequestResult]],
                  references: dict[Variant, dict[str, RequestResult]], prompts: dict[str, Prompt],
                  tolerance: Tolerance, pytest_outcomes: dict[Variant, PytestOutcome] | None = None) -> CheckResult:
    why = f"the reported symptom ({spec.path})"
    if spec.kind == SymptomKind.PARITY:
        check = parity_check(NAME, CheckKind.SYMPTOM, engine, references, tolerance, True,
                             {k: p.text for k, p in prompts.items()}, why)
        check.flags = symptom_flags(check.base, check.patched)
        check.criterion = f"{spec.description}: {check.criterion}"
        return check
    if spec.kind == SymptomKind.ACCURACY:
        obs = {v: accuracy_observation(v, engine[v], prompts, float(spec.threshold)) for v in ENGINE_VARIANTS}
        criterion = f"{spec.description}: exact match >= {spec.threshold:g} on {len(engine[Variant.BASE])} prompts"
    elif spec.kind == SymptomKind.SANE_OUTPUT:
        obs = {v: sane_observation(v, engine[v]) for v in ENGINE_VARIANTS}
        criterion = f"{spec.description}: every output non-empty, finite logprobs, no degenerate repetition"
    else:
        outcomes = pytest_outcomes or {}
        obs = {v: pytest_observation(v, outcomes.get(v)) for v in ENGINE_VARIANTS}
        criterion = f"{spec.description}: pytest {spec.pytest} fails on base and passes on patched"
    base, patched = obs[Variant.BASE], obs[Variant.PATCHED]
    return CheckResult(NAME, CheckKind.SYMPTOM, spec.kind, criterion, True, base, patched, None,
                       symptom_flags(base, patched), None, [], why)


def app_symptom_check(spec: SymptomSpec, app: CheckResult) -> CheckResult:
    """A symptom that is a neighbouring application failing: its app check, read as fail on base →
    pass on patched. The app's own section keeps the detail (runtime, examples). A crash on base is
    the symptom reproducing; a crash on patched only is ERROR (docs/design.md, "Verdicts"), on both
    the symptom remaining."""
    flags = [CheckFlag.ERROR] if app.patched.error and not app.base.error else symptom_flags(app.base, app.patched)
    return CheckResult(NAME, CheckKind.SYMPTOM, SymptomKind.APP, f"{spec.description}: {app.name} ({app.criterion}) "
                       f"fails on base and passes on patched", True, app.base, app.patched, app.reference, flags,
                       app.payload, list(app.examples), f"the reported symptom ({spec.path})")
