"""Presentation helpers shared by every report format: formatting, verdict colours, the three
questions answered from the checks, and the per-check one-line summary. Pure: no I/O."""

from __future__ import annotations

import dataclasses
import math
from datetime import datetime
from enum import Enum
from dataclasses import dataclass, field
from typing import Any

from infercheck.checks.comparators import REGISTRY
from infercheck.names import APP_LIKE, UNDECIDED_FLAGS, CheckFlag, CheckKind, Variant
from infercheck.oracle_grid import PLANS
from infercheck.payloads import (AppDetail, AppPayload, CodePathPayload, Detail, ParityPayload, Payload, PositionSeries,
                                 RuntimeRecord,
                                 StaticDetail, filled_fields)
from infercheck.records import CheckResult, Observation, ValidationRun

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
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # a nested record, field by field
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return str(value.value)
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


def epoch_seconds(stamp: str | None) -> float | None:
    """An ISO-8601 time as seconds since the epoch, the index's sort key (offsets taken into
    account); None when it is not one."""
    try:
        return datetime.fromisoformat(stamp or "").timestamp()
    except ValueError:
        return None


def flag_messages(run: ValidationRun, check: str | None) -> list[str]:
    """Messages of the verdict flags raised by one check (None: the run-level flags)."""
    return [f"{f.code}: {f.message}" for f in run.verdict.flags if f.check == check]


def observation_cell(check: CheckResult, variant: str) -> str:
    """'0.912 pass', 'error (timeout)' or '—' for a variant that did not take part."""
    obs = check.observation(variant)
    if obs is None:
        return "—"
    return f"error ({obs.error})" if obs.error else f"{fmt(obs.value)} {fmt_pass(obs.passed)}"


def detail_rows(item: Detail | Payload | None) -> list[tuple[str, Any]]:
    """(name, value) pairs of a Detail or Payload for a generic table (a per-position series is
    left to its plot); nothing for None."""
    if item is None:
        return []
    return [(name, value) for name, value in filled_fields(item) if not isinstance(value, PositionSeries)]


@dataclass(frozen=True)
class ToleranceRow:
    """One parity metric: each engine variant's value beside the floor and the threshold it met."""

    metric: str
    base: Any
    patched: Any
    floor: float | None  # None: no floor measured
    threshold: float
    table: float | None  # None: a run from before the floor kept the table apart


PARITY_METRICS = (("max_kl", "max KL"), ("mean_kl", "mean KL"), ("max_abs_dlogprob", "max |Δlogprob|"))


def tolerance_rows(check: CheckResult) -> tuple[list[ToleranceRow], str]:
    """A parity check's metrics with floor and threshold (checks/noise_floor.py), and how the floor
    was had; nothing for another check."""
    payload = check.payload
    if not isinstance(payload, ParityPayload):
        return [], ""

    def value(variant: Variant, metric: str) -> Any:
        obs = check.observation(variant)
        if obs is None or obs.detail is None:
            return None
        return obs.value if metric == "max_kl" else getattr(obs.detail, metric, None)
    rows = [ToleranceRow(label, value(Variant.BASE, key), value(Variant.PATCHED, key), payload.floor.get(key),
                         payload.profile[key], payload.table.get(key))
            for key, label in PARITY_METRICS if key in payload.profile]
    return rows, payload.floor_note


def check_summary(check: CheckResult) -> dict[str, Any]:
    """The per-check record in verdict.json, with a one-line text form."""
    variants = {}
    for variant in Variant:
        obs = check.observation(variant)
        variants[variant.value] = None if obs is None else {"passed": obs.passed, "value": obs.value,
                                                            "error": obs.error}
    line = f"{check.name} [{check.kind}] " + " | ".join(f"{v} {observation_cell(check, v)}" for v in Variant)
    if check.flags:
        line += " — " + ", ".join(check.flags)
    return {"name": check.name, "kind": str(check.kind), "affected": check.affected, **variants,
            "flags": [str(f) for f in check.flags], "line": line}


def verdict_record(run: ValidationRun) -> dict[str, Any]:
    """verdict.json: the headline and everything the reports index lists."""
    v = run.verdict
    return {"run_id": run.run_id, "started": run.started, "patch": run.patch.name, "case": run.case,
            "expected": run.expected, "expected_matches": expected_matches(run.expected, v.headline),
            "headline": str(v.headline), "exit_code": v.exit_code, "has_symptom": v.has_symptom,
            "elapsed_s": run.elapsed_s, "model": run.model, "engine": run.engine,
            "flags": [{"code": str(f.code), "check": f.check, "message": f.message} for f in v.flags],
            "checks": [check_summary(c) for c in run.checks]}


@dataclass
class Answer:
    question: str
    status: str  # good / warn / bad / na
    line: str  # the one-line answer
    checks: list[CheckResult] = field(default_factory=list)  # the evidence


def _names(checks: list[CheckResult]) -> str:
    """Check names; an app that regressed on some comparators names them ("app/x (consistency)")."""
    return ", ".join(c.name + (f" ({', '.join(c.regressed_parts())})" if c.regressed_parts() else "")
                     for c in checks)


def _with(checks: list[CheckResult], *codes: CheckFlag) -> list[CheckResult]:
    return [c for c in checks if any(code in c.flags for code in codes)]


def _errored(checks: list[CheckResult]) -> list[CheckResult]:
    return [c for c in checks if CheckFlag.ERROR in c.flags or c.patched.error]


def _symptom(checks: list[CheckResult]) -> Answer:
    q = "Is the symptom gone?"
    if not checks:
        return Answer(q, "na", "Not asked: no symptom spec for this patch.")
    if bad := _errored(checks):
        return Answer(q, "bad", f"Unknown: {_names(bad)} could not run on patched.", checks)
    if bad := [c for c in checks if CheckFlag.SYMPTOM_FAILS in c.flags or c.patched.passed is False]:
        return Answer(q, "bad", f"No: {_names(bad)} still fails on patched.", checks)
    if all(c.patched.passed for c in checks):
        was = "failed on base" if all(c.base.passed is False for c in checks) else "see base column"
        return Answer(q, "good", f"Yes: {_names(checks)} passes on patched ({was}).", checks)
    return Answer(q, "warn", f"Unknown: {_names(checks)} has no pass/fail on patched.", checks)


def _quality(checks: list[CheckResult], everything: list[CheckResult]) -> Answer:
    q = "Is quality restored?"
    if bad := _with(checks, CheckFlag.NOT_RESTORED):
        how = "still fails on patched" if all(c.kind in APP_LIKE for c in bad) else "still differs from the reference"
        return Answer(q, "bad", f"No: {_names(bad)} {how}.", checks)
    if bad := _errored(checks):
        return Answer(q, "bad", f"Unknown: {_names(bad)} could not run on patched.", checks)
    if gaming := _with(everything, CheckFlag.GAMES_HARNESS):
        return Answer(q, "bad", f"Not shown: {_names(gaming)} finds the patch looking for its judges.", checks)
    if bypass := _with(everything, CheckFlag.WORKAROUND):
        return Answer(q, "warn", f"Only by a workaround: {_names(bypass)} shows the feature disabled or "
                      "bypassed.", checks)
    if weak := _with(checks, *UNDECIDED_FLAGS):
        return Answer(q, "warn", f"Undecided: {_names(weak)} lacks power or is unstable.", checks)
    if not checks:
        return Answer(q, "warn", "Not measured: no quality check covers the affected area.")
    if bad := [c for c in checks if c.patched.passed is False]:
        return Answer(q, "bad", f"No: {_names(bad)} fails on patched.", checks)
    how = "passes on patched" if all(c.kind in APP_LIKE for c in checks) else "matches the reference"
    return Answer(q, "good", f"Yes: {_names(checks)} {how}.", checks)


def _collateral(checks: list[CheckResult], everything: list[CheckResult]) -> Answer:
    q = "Did anything else break?"
    if bad := _with(everything, CheckFlag.REGRESSED) or _errored(checks):
        return Answer(q, "bad", f"Yes: {_names(bad)} passed on base and fails (or errors) on patched.", checks)
    if not checks:
        return Answer(q, "warn", "Not measured: no neighbouring check ran.")
    if weak := _with(checks, *UNDECIDED_FLAGS):
        return Answer(q, "warn", f"Undecided: {_names(weak)} lacks power or is unstable.", checks)
    return Answer(q, "good", f"No: {len(checks)} neighbouring check(s) hold.", checks)


def answers(run: ValidationRun) -> list[Answer]:
    """The three questions, each answered from its group: symptom checks, quality checks in the
    affected area, and the rest (neighbouring applications)."""
    symptom = [c for c in run.checks if c.kind == CheckKind.SYMPTOM]
    quality = [c for c in run.checks if c.kind != CheckKind.SYMPTOM and c.affected]
    rest = [c for c in run.checks if c.kind != CheckKind.SYMPTOM and not c.affected]
    return [_symptom(symptom), _quality(quality, run.checks), _collateral(rest, run.checks)]


# ---- neighbouring applications and static patch signs ------------------------------------------------

APP_EXAMPLE_KEYS = ("key", "request", "position", "why", "observed", "expected", "a_text", "b_text")
RUNTIME_ROWS = (("tokens_per_s", "tokens/s"), ("hit_rate", "prefix-cache hit rate"),
                ("preemptions", "preemptions"), ("steps", "steps"))
EXAMPLE_CLIP = 1200  # characters of one example value shown in the page (results.json keeps all)


def _number(value: Any) -> float | None:
    """A finite number, else None."""
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


def app_detail(obs: Observation | None) -> AppDetail:
    return obs.detail if obs is not None and isinstance(obs.detail, AppDetail) else AppDetail()


def app_runtime(check: CheckResult, variant: Variant) -> RuntimeRecord:
    """One variant's runtime record: the check's payload, else the observation's detail."""
    if isinstance(check.payload, AppPayload) and variant in check.payload.runtime:
        return check.payload.runtime[variant]
    return app_detail(check.observation(variant)).runtime


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
    return AppStatus(fmt_pass(obs.passed), app_detail(obs).failed)


@dataclass
class ComparatorRow:
    name: str
    cells: dict[str, tuple[str, bool, dict[str, Any]]]  # variant -> (summary, failed, detail shown)


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
    grid: "GridView | None" = None  # an oracle's parameter × plan table
    cache: "list[CacheRow] | None" = None  # the prefix-cache oracle's cached tokens per request
    positions: "PositionsView | None" = None  # the position oracle's variant × bucket errors


@dataclass
class GridCell:
    text: str  # "2/48 FAIL → 0/48" (failed/results, base → patched), "0/48" when both pass
    failed: bool  # patched fails here
    title: str  # the modes failing and the worst failure, for the cell's tooltip


@dataclass
class GridView:
    """An oracle's results by parameter (rows) and batch plan (columns), every mode summed."""

    comparator: str
    plans: list[str]
    rows: list[tuple[str, list[GridCell]]]  # failing parameters (on either variant) first


def comparison_rows(check: CheckResult, comparator: str, key: str) -> list[tuple[str, dict[str, Any]]]:
    """(variant, row) for each row of the comparator's detail list `key`, base's then patched's."""
    out = []
    for variant in (Variant.BASE, Variant.PATCHED):
        found = app_detail(check.observation(variant)).comparison(comparator)
        if found is not None:
            out += [(variant.value, row) for row in found.detail.get(key) or []]
    return out


def _grid_cells(check: CheckResult, comparator: str) -> dict[str, dict[tuple[str, str], list[dict[str, Any]]]]:
    out: dict[str, dict[tuple[str, str], list[dict[str, Any]]]] = {v.value: {} for v in (Variant.BASE, Variant.PATCHED)}
    for variant, cell in comparison_rows(check, comparator, "table"):
        out[variant].setdefault((cell["parameter"], cell["plan"]), []).append(cell)
    return out


def grid_view(check: CheckResult, comparator: str = "distributions") -> GridView | None:
    """The comparator's parameter × plan × mode table (checks/sampling_oracle.py) as parameter ×
    plan cells of failed/results per variant; None when neither variant recorded one."""
    cells = _grid_cells(check, comparator)
    keys = sorted({k for c in cells.values() for k in c})
    if not keys:
        return None
    found = {plan for _, plan in keys}
    plans = [p for p in PLANS if p in found] + sorted(found - set(PLANS))  # the oracle's order, then any others
    failed = {p for c in cells.values() for (p, _), group in c.items() if any(x["failed"] for x in group)}
    rows = []
    for parameter in sorted({p for p, _ in keys}, key=lambda p: (p not in failed, p)):
        row = []
        for plan in plans:
            per = {v: cells[v].get((parameter, plan), []) for v in cells}
            counts = {v: (sum(x["failed"] for x in g), sum(x["results"] for x in g)) for v, g in per.items()}
            text = " → ".join(f"{f}/{n}" + (" FAIL" if f else "") for f, n in counts.values() if n) or "—"
            bad = [x for x in per["patched"] if x["failed"]]
            title = "; ".join(f"{x['mode']}: {x['worst']}" for x in bad)
            row.append(GridCell(text, bool(bad), title))
        rows.append((parameter, row))
    return GridView(comparator, plans, rows)


@dataclass
class CacheRow:
    request: str  # "<set>/<key>"
    prompt_tokens: int
    ideal: int  # what the ideal cache serves (on base's outputs; patched's where base has none)
    base: str  # measured cached tokens, "—" when the variant has no such request
    patched: str
    state: str  # "FAIL" (more than the ideal), "lost" (fewer), "" (equal)


def cache_view(check: CheckResult, comparator: str = "prefix-cache") -> list[CacheRow] | None:
    """The ideal cache's and the engines' cached tokens per request (checks/prefix_cache.py),
    requests that differ on patched first; None when neither variant recorded them."""
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    for variant, row in comparison_rows(check, comparator, "cached_tokens"):
        rows.setdefault(row["request"], {})[variant] = row
    if not rows:
        return None
    out = []
    for request, per in rows.items():
        first = per.get("base") or per["patched"]
        patched = per.get("patched")
        state = "" if patched is None or patched["measured"] == patched["ideal"] else \
            "FAIL" if patched["measured"] > patched["ideal"] else "lost"
        out.append(CacheRow(request, first["prompt_tokens"], first["ideal"],
                            str(per["base"]["measured"]) if "base" in per else "—",
                            str(patched["measured"]) if patched else "—", state))
    return sorted(out, key=lambda r: r.state == "")


@dataclass
class PositionsView:
    """The position oracle's worst |Δlogprob| per config variant (rows) and position bucket."""

    buckets: list[str]
    rows: list[tuple[str, list[GridCell]]]  # variants failing on patched first


def positions_view(check: CheckResult, comparator: str = "positions") -> PositionsView | None:
    """Cells "base → patched" of each variant × bucket's worst |Δlogprob| (checks/positions.py);
    None when neither variant recorded one."""
    cells: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for variant, cell in comparison_rows(check, comparator, "cells"):
        cells.setdefault((cell["variant"], cell["bucket"]), {})[variant] = cell
    if not cells:
        return None
    buckets = list(dict.fromkeys(b for _, b in cells))
    fails_on_patched = lambda per: not per.get("patched", {"passed": True})["passed"]  # noqa: E731
    failing = {v for (v, _), per in cells.items() if fails_on_patched(per)}
    rows = []
    for name in sorted({v for v, _ in cells}, key=lambda v: (v not in failing, v)):
        row = []
        for bucket in buckets:
            per = cells.get((name, bucket), {})
            if not per:
                row.append(GridCell("—", False, ""))
                continue
            text = " → ".join(f"{c['max_abs_dlogprob']:.2g}" + ("" if c["passed"] else " FAIL") for c in per.values())
            any_cell = next(iter(per.values()))
            row.append(GridCell(text, fails_on_patched(per),
                                f"tolerance {any_cell['tolerance']:.2g} over {any_cell['positions']} positions"))
        rows.append((name, row))
    return PositionsView(buckets, rows)


def _comparators(check: CheckResult) -> list[ComparatorRow]:
    """One row per comparator that ran on either variant, in the app's order; each cell shows what
    the comparator's registry entry says to show of its detail."""
    details = {v: app_detail(check.observation(v)) for v in (Variant.BASE, Variant.PATCHED)}
    names = list(dict.fromkeys(c.comparator for d in details.values() for c in d.comparisons))
    rows = []
    for name in names:
        entry = REGISTRY.get(name)  # None: a comparator this harness no longer has (an old results.json)
        cells = {}
        for variant, detail in details.items():
            found = detail.comparison(name)
            if found is None:
                cells[variant.value] = ("—", name in detail.failed, {})
                continue
            shown = entry.shown_detail(found.detail) if entry else dict(found.detail)
            cells[variant.value] = (fmt(found.summary), name in detail.failed, shown)
        rows.append(ComparatorRow(name, cells))
    return rows


def _throughput(check: CheckResult) -> tuple[str | None, bool]:
    payload = check.payload
    if not isinstance(payload, AppPayload) or not payload.throughput_recorded:
        return None, False
    data = payload.throughput
    if data is None:
        return "not compared: too few paired steps with a measurable rate", False
    numbers = (f"median slowdown {fmt_rate(data.median_slowdown)}, tolerance {fmt_rate(data.tolerance)}, "
               f"p={fmt(data.p_value)}, {fmt(data.steps)} paired steps")
    return (f"{data.why} — {numbers}" if data.why else numbers), data.flagged


def _examples(examples: list[dict[str, Any]]) -> list[ExampleView]:
    out = []
    for ex in examples or []:
        keys = [k for k in APP_EXAMPLE_KEYS if k in ex] + [k for k in ex if k not in APP_EXAMPLE_KEYS
                                                           and k not in ("variant", "comparator")]
        out.append(ExampleView(fmt(ex.get("variant")), fmt(ex.get("comparator")),
                               [(str(k), clip(fmt(ex[k]))) for k in keys]))
    return out


def _markers(check: CheckResult) -> list[tuple[str, str]]:
    out = []
    if CheckFlag.REGRESSED in check.flags:
        out.append(("COLLATERAL", "bad"))
    if CheckFlag.WORKAROUND in check.flags:
        out.append(("WORKAROUND", "warn"))
    if CheckFlag.GAMES_HARNESS in check.flags:
        out.append(("LOOKS FOR ITS JUDGES", "bad"))
    return out


def reference_role(check: CheckResult) -> str | None:
    ref = check.reference
    return getattr(ref.detail, "role", None) if ref is not None else None


def app_view(check: CheckResult, index: int = 0) -> AppView:
    runtime = {v: app_runtime(check, v) for v in (Variant.BASE, Variant.PATCHED)}
    rows = []
    for key, label in RUNTIME_ROWS:
        fmt_one = RUNTIME_FORMAT.get(key, fmt_count)
        rows.append((label, fmt_one(getattr(runtime[Variant.BASE], key)),
                     fmt_one(getattr(runtime[Variant.PATCHED], key))))
    hit_rate, tokens_per_s = (" → ".join(RUNTIME_FORMAT[key](getattr(runtime[v], key)) for v in runtime)
                              for key in ("hit_rate", "tokens_per_s"))
    throughput, flagged = _throughput(check)
    return AppView(check, index, {v.value: app_status(check.observation(v)) for v in (Variant.BASE, Variant.PATCHED)},
                   _comparators(check), rows, throughput, flagged, check.workaround_reason() or None,
                   _markers(check), _examples(check.examples), reference_role(check), hit_rate, tokens_per_s,
                   grid_view(check) if check.kind == CheckKind.ORACLE else None,
                   cache_view(check) if check.kind == CheckKind.ORACLE else None,
                   positions_view(check) if check.kind == CheckKind.ORACLE else None)


def app_views(run: ValidationRun) -> list[AppView]:
    """The app and oracle checks, in run order, ready for the report."""
    return [app_view(check, index) for index, check in enumerate(run.checks) if check.kind in APP_LIKE]


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
    detail = patched.detail if isinstance(patched.detail, StaticDetail) else StaticDetail()
    evidence = [{"location": f"{e.file or '?'}:{e.line}", "sign": e.sign, "text": e.text} for e in detail.evidence]
    total = _number(patched.value)
    return StaticView(check, index, evidence, None if total is None else int(total), check.workaround_reason(),
                      _markers(check), patched.error)


def static_views(run: ValidationRun) -> list[StaticView]:
    """The static checks (kind "static"), with their evidence rows."""
    return [static_view(check, index) for index, check in enumerate(run.checks) if check.kind == CheckKind.STATIC]



@dataclass
class CodePathView:
    check: CheckResult
    index: int
    payload: CodePathPayload
    markers: list[tuple[str, str]]


def code_path_views(run: ValidationRun) -> list[CodePathView]:
    """The code-path check (kind "code_path"): each changed hunk with the checks that ran it, and
    the functions base ran that patched never runs."""
    return [CodePathView(check, index, check.payload, _markers(check)) for index, check in enumerate(run.checks)
            if check.kind == CheckKind.CODE_PATH and isinstance(check.payload, CodePathPayload)]
