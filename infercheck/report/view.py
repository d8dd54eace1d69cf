"""Presentation helpers shared by every report format: formatting, verdict colours, the three
questions answered from the checks, and the per-check one-line summary. Pure: no I/O."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from infercheck.checks.records import (FLAG_ERROR, FLAG_NOT_RESTORED, FLAG_REGRESSED, FLAG_SYMPTOM_FAILS,
                                       FLAG_UNDERPOWERED, FLAG_UNSTABLE, FLAG_WORKAROUND, VARIANTS, CheckResult,
                                       Observation, ValidationRun)

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
    """Check names; an app that regressed on some comparators names them ("app/x (consistency)")."""
    return ", ".join(c.name + (f" ({', '.join(c.comparison['regressed'])})" if c.comparison.get("regressed") else "")
                     for c in checks)


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
        how = "still fails on patched" if all(c.kind == "app" for c in bad) else "still differs from the reference"
        return Answer(q, "bad", f"No: {_names(bad)} {how}.", checks)
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
    how = "passes on patched" if all(c.kind == "app" for c in checks) else "matches the reference"
    return Answer(q, "good", f"Yes: {_names(checks)} {how}.", checks)


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


# ---- neighbouring applications and static patch signs ------------------------------------------------

APP_COMPARATORS = ("reference", "consistency", "sampler", "seeded", "logprobs", "structured", "stop")
APP_EXAMPLE_KEYS = ("key", "request", "position", "why", "observed", "expected", "a_text", "b_text")
RUNTIME_ROWS = (("tokens_per_s", "tokens/s"), ("hit_rate", "prefix-cache hit rate"),
                ("preemptions", "preemptions"), ("steps", "steps"))
EXAMPLE_CLIP = 1200  # characters of one example value shown in the page (results.json keeps all)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> float | None:
    """A finite number, else None (results.json stores non-finite floats as strings)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def fmt_rate(value: Any) -> str:
    """A fraction 0..1 as a percentage ('82.0%'); '—' when missing."""
    number = _number(value)
    return "—" if number is None else f"{number:.1%}"


def fmt_tokens_per_s(value: Any) -> str:
    number = _number(value)
    return "—" if number is None else f"{number:.1f}"


def fmt_count(value: Any) -> str:
    number = _number(value)
    return "—" if number is None else str(int(number))


RUNTIME_FORMAT = {"hit_rate": fmt_rate, "tokens_per_s": fmt_tokens_per_s}


def clip(text: str, limit: int = EXAMPLE_CLIP) -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text) - limit} more characters)"


def app_runtime(check: CheckResult, variant: str) -> dict[str, Any]:
    """One variant's runtime record: the check's comparison, else the observation's detail."""
    runtime = _dict(_dict(_dict(check.comparison).get("runtime")).get(variant))
    if not runtime:
        obs = check.observation(variant)
        runtime = _dict(obs.detail.get("runtime")) if obs is not None else {}
    return runtime


def failed_comparators(obs: Observation | None) -> list[str]:
    text = _dict(obs.detail).get("failed_on") if obs is not None else None
    return [part.strip() for part in text.split(",") if part.strip()] if isinstance(text, str) else []


@dataclass
class AppStatus:
    word: str  # pass / FAIL / error / n/a / —
    failed: list[str]  # comparators that failed
    error: str | None = None

    @property
    def css(self) -> str:
        return {"pass": "pass", "FAIL": "FAIL", "error": "FAIL"}.get(self.word, "muted")

    @property
    def text(self) -> str:
        if self.error:
            return f"error ({self.error})"
        return f"{self.word} ({', '.join(self.failed)})" if self.failed else self.word


def app_status(obs: Observation | None) -> AppStatus:
    if obs is None:
        return AppStatus("—", [])
    if obs.error:
        return AppStatus("error", [], obs.error)
    return AppStatus(fmt_pass(obs.passed), failed_comparators(obs))


@dataclass
class ComparatorRow:
    name: str
    cells: dict[str, tuple[str, bool, dict[str, Any]]]  # variant -> (summary, failed, detail numbers)


@dataclass
class ExampleView:
    variant: str
    comparator: str
    fields: list[tuple[str, str]]  # (key, shown value)


@dataclass
class AppView:
    check: CheckResult
    index: int  # position in run.checks (the page anchor check-<index>)
    status: dict[str, AppStatus]  # base / patched
    comparators: list[ComparatorRow]
    runtime: list[tuple[str, str, str]]  # (label, base, patched)
    throughput: str | None  # the throughput comparison line
    throughput_flagged: bool
    workaround: str | None
    markers: list[tuple[str, str]]  # (marker, css class): COLLATERAL, WORKAROUND
    examples: list[ExampleView]
    reference_role: str | None
    hit_rate: str  # "base → patched", percentages
    tokens_per_s: str  # "base → patched"


def _comparator_names(details: list[dict[str, Any]]) -> list[str]:
    """The known comparators in their usual order, then any other `<name>` with a `<name>_detail`."""
    present = [c for c in APP_COMPARATORS if any(c in d for d in details)]
    others = [k for d in details for k in d if isinstance(d.get(f"{k}_detail"), dict) and k not in present]
    return present + list(dict.fromkeys(others))


def _comparators(check: CheckResult) -> list[ComparatorRow]:
    observations = {v: check.observation(v) for v in ("base", "patched")}
    details = {v: (_dict(o.detail) if o is not None else {}) for v, o in observations.items()}
    failed = {v: failed_comparators(o) for v, o in observations.items()}
    rows = []
    for name in _comparator_names(list(details.values())):
        cells = {}
        for variant, detail in details.items():
            summary = detail.get(name)
            cells[variant] = ("—" if summary is None else fmt(summary), name in failed[variant],
                              _dict(detail.get(f"{name}_detail")))
        rows.append(ComparatorRow(name, cells))
    return rows


def _throughput(check: CheckResult) -> tuple[str | None, bool]:
    comparison = _dict(check.comparison)
    if "throughput" not in comparison:
        return None, False
    data = comparison["throughput"]
    if not isinstance(data, dict):
        return "not compared: too few paired steps with a measurable rate", False
    numbers = (f"median slowdown {fmt_rate(data.get('median_slowdown'))}, tolerance {fmt_rate(data.get('tolerance'))}, "
               f"p={fmt(data.get('p_value'))}, {fmt(data.get('steps'))} paired steps")
    why = data.get("why")
    return (f"{why} — {numbers}" if why else numbers), bool(data.get("flagged"))


def _examples(examples: list[Any]) -> list[ExampleView]:
    out = []
    for ex in examples or []:
        ex = _dict(ex)
        keys = [k for k in APP_EXAMPLE_KEYS if k in ex] + [k for k in ex if k not in APP_EXAMPLE_KEYS
                                                           and k not in ("variant", "comparator")]
        out.append(ExampleView(fmt(ex.get("variant")), fmt(ex.get("comparator")),
                               [(str(k), clip(fmt(ex[k]))) for k in keys]))
    return out


def _markers(check: CheckResult) -> list[tuple[str, str]]:
    out = []
    flags = check.flags or []
    if FLAG_REGRESSED in flags:
        out.append(("COLLATERAL", "bad"))
    if FLAG_WORKAROUND in flags:
        out.append(("WORKAROUND", "warn"))
    return out


def _text(value: Any) -> str | None:
    return None if value is None or value == "" else fmt(value)


def app_view(check: CheckResult, index: int = 0) -> AppView:
    runtime = {v: app_runtime(check, v) for v in ("base", "patched")}
    rows = []
    for key, label in RUNTIME_ROWS:
        fmt_one = RUNTIME_FORMAT.get(key, fmt_count)
        rows.append((label, fmt_one(runtime["base"].get(key)), fmt_one(runtime["patched"].get(key))))
    hit_rate, tokens_per_s = (" → ".join(RUNTIME_FORMAT[key](runtime[v].get(key)) for v in ("base", "patched"))
                              for key in ("hit_rate", "tokens_per_s"))
    throughput, flagged = _throughput(check)
    ref = check.reference
    role = _text(_dict(ref.detail).get("role")) if ref is not None else None
    return AppView(check, index, {v: app_status(check.observation(v)) for v in ("base", "patched")},
                   _comparators(check), rows, throughput, flagged, _text(_dict(check.comparison).get("workaround")),
                   _markers(check), _examples(check.examples), role, hit_rate, tokens_per_s)


def app_views(run: ValidationRun) -> list[AppView]:
    """The app checks (kind "app"), in run order, ready for the report."""
    return [app_view(check, index) for index, check in enumerate(run.checks) if check.kind == "app"]


@dataclass
class StaticView:
    check: CheckResult
    index: int
    evidence: list[dict[str, str]]  # location (file:line), sign, text
    total: int | None  # signs found (the evidence list may be capped)
    workaround: str | None
    markers: list[tuple[str, str]]
    error: str | None


def static_view(check: CheckResult, index: int = 0) -> StaticView:
    patched = check.patched
    found = _dict(patched.detail).get("evidence") if patched is not None else None
    evidence = []
    for item in found if isinstance(found, list) else []:
        item = _dict(item)
        location = fmt(item.get("file") or "?") + (f":{fmt(item['line'])}" if item.get("line") is not None else "")
        evidence.append({"location": location, "sign": fmt(item.get("sign")), "text": fmt(item.get("text", ""))})
    total = _number(patched.value) if patched is not None else None
    return StaticView(check, index, evidence, None if total is None else int(total),
                      _text(_dict(check.comparison).get("workaround")), _markers(check),
                      patched.error if patched is not None else None)


def static_views(run: ValidationRun) -> list[StaticView]:
    """The static checks (kind "static"), with their evidence rows."""
    return [static_view(check, index) for index, check in enumerate(run.checks) if check.kind == "static"]
