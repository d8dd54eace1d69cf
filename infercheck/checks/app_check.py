"""A neighbouring application as a CheckResult: its comparators on base and on patched, its runtime
record (tokens/s, prefix-cache hit rate, preemptions) and its workaround signals."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from infercheck.checks.comparators import ComparatorInput, run_comparators, workaround_signs
from infercheck.checks.signals import Runtime, throughput_signal, workaround_signals
from infercheck.draw import Draw
from infercheck.engine_limits import Limitation, matching
from infercheck.names import ENGINE_VARIANTS, CheckFlag, Variant
from infercheck.payloads import AppDetail, AppPayload, Comparison, ReferenceDetail
from infercheck.records import CheckResult, Observation
from infercheck.run.job import RequestResult
from infercheck.specs import App

METRIC = "failed comparators"
MAX_EXAMPLES = 6


def observe(variant: Variant, comparisons: list[Comparison], runtime: Runtime, n: int) -> Observation:
    if runtime.error:  # the app's engine failed: its partial results judge nothing
        return Observation(variant, None, None, None, n, AppDetail(runtime=runtime.record()), runtime.error)
    failed = [c.comparator for c in comparisons if not c.passed]
    kept = [replace(c, examples=[]) for c in comparisons]  # the check keeps the examples, once
    return Observation(variant, float(len(failed)), not failed, None, n, AppDetail(kept, runtime.record(), failed))


def app_check(app: App, why: str, affected: bool, engine: dict[Variant, list[RequestResult]],
              refs: dict[Variant, dict[str, RequestResult]], runtime: dict[Variant, Runtime],
              params: dict[str, dict[str, Any]], profile: dict[str, float],
              signals: dict[str, float], drift: float = 0.0, draw: Draw = Draw(),
              base_unmodified: bool = True, limitations: tuple[Limitation, ...] = ()) -> CheckResult:
    """engine/refs/runtime: variant -> this app's results / reference scorings / runtime record;
    drift: the whole patched run's log speed ratio to base (signals.machine_drift); draw: the run's
    prompt draw; base_unmodified: base is the unmodified engine (no base patches); limitations: the
    engine's known limitations (an app base cannot run because of one says so)."""
    criterion = app.criterion or "; ".join(app.compare)
    comparisons = {v: [] if runtime[v].error else
                   run_comparators(ComparatorInput(app, engine[v], refs[v], params, profile, draw))
                   for v in ENGINE_VARIANTS}
    base, patched = (observe(v, comparisons[v], runtime[v], len(engine[v])) for v in ENGINE_VARIANTS)
    payload = AppPayload(runtime={v: runtime[v].record() for v in ENGINE_VARIANTS})
    reference = Observation(Variant.REFERENCE, detail=ReferenceDetail(
        "HF transformers float32 (teacher-forced scoring and exact distributions)"))
    flags = []
    if base.error:
        payload.note = base_failed_note(base.error, runtime[Variant.PATCHED], limitations)
        return CheckResult(app.check_name, app.kind, METRIC, criterion, affected, base, patched, reference,
                           flags, payload, [], why)
    if patched.error and not runtime[Variant.PATCHED].engine_raised:
        flags.append(CheckFlag.ERROR)  # a refused allocation where base ran: the machine, not the patch (ERROR:run)
        return CheckResult(app.check_name, app.kind, METRIC, criterion, affected, base, patched, reference,
                           flags, payload, [], why)
    if patched.error:  # the patched engine raised on requests base served: the patch broke the app
        return crashed_check(app, criterion, why, affected, base, patched, reference, payload)
    payload.regressed = regressed_comparators(comparisons[Variant.BASE], comparisons[Variant.PATCHED])
    if payload.regressed:  # a comparator that held on base breaks, even where another failed on both
        flags.append(CheckFlag.REGRESSED)
    if not patched.passed:
        flags.append(CheckFlag.NOT_RESTORED)
    bypassed = workaround_signals(runtime[Variant.BASE], runtime[Variant.PATCHED], app.record, signals, drift)
    bypassed += workaround_signs(app.compare, comparisons[Variant.BASE], comparisons[Variant.PATCHED],
                                 base_unmodified)
    if "throughput" in app.record:
        payload.throughput_recorded = True
        payload.throughput = throughput_signal(runtime[Variant.BASE], runtime[Variant.PATCHED], signals, drift)
    if bypassed:
        flags.append(CheckFlag.WORKAROUND)
        payload.workaround = "; ".join(bypassed)
    examples = [{"variant": v, "comparator": c.comparator, **e} for v in ENGINE_VARIANTS
                for c in comparisons[v] for e in c.examples][:MAX_EXAMPLES]
    return CheckResult(app.check_name, app.kind, METRIC, criterion, affected, base, patched, reference, flags,
                       payload, examples, why)


def base_failed_note(error: str, patched: Runtime, limitations: tuple[Limitation, ...]) -> str:
    """Why an app base could not run judges nothing: a known limitation of this engine build (named,
    with its cause), or an unknown failure."""
    limit = matching(error, limitations)
    if limit is None:
        return "the app failed on base, so this run cannot judge the patch on it"
    ran = "the patched engine ran it" if not patched.error else "the patched engine fails the same way"
    return (f"engine limitation of this build, not a failure of the patch: {limit.line()} ({limit.cause}); "
            f"{ran}; this run cannot judge the patch on it")


SERVES = "serves"  # the pseudo-comparator a crash fails: the engine serves every request base served


def crashed_check(app: App, criterion: str, why: str, affected: bool, base: Observation, patched: Observation,
                  reference: Observation, payload: AppPayload) -> CheckResult:
    """The patched engine raised (at start-up or while serving) on groups the base engine served:
    the app fails on patched with the exception as its evidence, a regression like any comparator
    that held on base (COLLATERAL outside the symptom; docs/apps.md)."""
    error = patched.error or ""
    failed = Comparison(SERVES, False, 1.0, f"the patched engine raised where base served: {error}",
                        {"errors": error.split("; ")})
    patched = replace(patched, value=1.0, passed=False, error=None,
                      detail=AppDetail([failed], payload.runtime[Variant.PATCHED], [SERVES]))
    payload.regressed = [SERVES]
    payload.note = f"the patched engine raised on requests the base engine served: {error}"
    return CheckResult(app.check_name, app.kind, METRIC, criterion, affected, base, patched, reference,
                       [CheckFlag.REGRESSED, CheckFlag.NOT_RESTORED], payload, [], why)


def regressed_comparators(base: list[Comparison], patched: list[Comparison]) -> list[str]:
    """Comparators that pass on base and fail on patched: e.g. burst-vs-solo consistency broken by a
    patch on an app whose reference comparison fails on both (the bug's own damage). A comparator
    over a parameter grid (an oracle's: its detail lists `failing_cells`, parameter@mode, or
    `failing_parameters`) that fails on both regresses where a cell that held on base fails on
    patched: "distributions[top_k@processed_logprobs]"."""
    held = {c.comparator for c in base if c.passed}
    out = [c.comparator for c in patched if not c.passed and c.comparator in held]
    failing_on_base = {c.comparator: failing_parts(c) or set() for c in base if not c.passed}
    for c in patched:
        parts = failing_parts(c)
        if not c.passed and c.comparator in failing_on_base and parts is not None:
            out += [f"{c.comparator}[{p}]" for p in sorted(parts - failing_on_base[c.comparator])]
    return out


def failing_parts(c: Comparison) -> set[str] | None:
    """The grid cells a comparator names as failing (None: it names none)."""
    for key in ("failing_cells", "failing_parameters"):
        if key in c.detail:
            return set(c.detail[key] or ())
    return None
