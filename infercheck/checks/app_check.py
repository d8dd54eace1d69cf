"""A neighbouring application as a CheckResult: its comparators on base and on patched, its runtime
record (tokens/s, prefix-cache hit rate, preemptions) and its workaround signals."""

from __future__ import annotations

from typing import Any

from infercheck.apps import App
from infercheck.checks import app_compare as cmp
from infercheck.checks.records import FLAG_ERROR, FLAG_NOT_RESTORED, FLAG_REGRESSED, FLAG_WORKAROUND, CheckResult, Observation
from infercheck.checks.signals import Runtime, throughput_signal, workaround_signals
from infercheck.run.job import RequestResult


def run_comparators(app: App, results: list[RequestResult], refs: dict[str, RequestResult],
                    params: dict[str, dict[str, Any]], profile: dict[str, float]) -> list[cmp.Comparison]:
    out = []
    workload = app.spec["workload"]
    for name in app.compare:
        opts = app.options(name)
        if name == "reference":
            out.append(cmp.compare_reference(results, refs, profile))
        elif name == "consistency":
            out.append(cmp.compare_consistency(results, opts["a"], opts["b"], profile["near_tie"]))
        elif name == "seeded":
            out.append(cmp.compare_seeded(results))
        elif name == "sampler":
            out.append(cmp.compare_sampler(results, refs, params, float(opts.get("alpha", 0.001)),
                                           float(opts.get("min_expected", 5))))
        elif name == "logprobs":
            temperature = float((workload.get("processed_sampling") or {}).get("temperature", 0.7))
            out.append(cmp.compare_logprobs(results, refs, temperature, profile["max_abs_dlogprob"]))
        elif name == "structured":
            out.append(cmp.compare_structured(results, refs, workload["schema"], profile["near_tie"]))
        elif name == "stop":
            out.append(cmp.compare_stop(results, list(workload["stops"]), int(workload.get("n", 4)),
                                        int(workload.get("max_tokens", 24)),
                                        bool(workload.get("include_stop_str_in_output"))))
    return out


def observe(variant: str, comparisons: list[cmp.Comparison], runtime: Runtime, n: int) -> Observation:
    if runtime.error:  # the app's engine failed: its partial results judge nothing
        return Observation(variant, None, None, None, n, {"runtime": runtime.as_detail()}, runtime.error)
    failed = [c.comparator for c in comparisons if not c.passed]
    detail: dict[str, Any] = {c.comparator: c.summary for c in comparisons}
    detail.update({f"{c.comparator}_detail": c.detail for c in comparisons})
    detail["runtime"] = runtime.as_detail()
    if failed:
        detail["failed_on"] = ", ".join(failed)
    return Observation(variant, float(len(failed)), not failed, None, n, detail)


def app_check(app: App, why: str, affected: bool, engine: dict[str, list[RequestResult]],
              refs: dict[str, dict[str, RequestResult]], runtime: dict[str, Runtime],
              params: dict[str, dict[str, Any]], profile: dict[str, float],
              signals: dict[str, float], drift: float = 0.0) -> CheckResult:
    """engine/refs/runtime: variant -> this app's results / reference scorings / runtime record;
    drift: the whole patched run's log speed ratio to base (signals.machine_drift)."""
    criterion = app.criterion or "; ".join(app.compare)
    comparisons = {v: [] if runtime[v].error else run_comparators(app, engine[v], refs[v], params, profile)
                   for v in ("base", "patched")}
    base, patched = (observe(v, comparisons[v], runtime[v], len(engine[v])) for v in ("base", "patched"))
    comparison: dict[str, Any] = {"runtime": {v: runtime[v].as_detail() for v in ("base", "patched")}}
    flags = []
    if base.error or patched.error:
        if base.error:
            comparison["note"] = "the app failed on base, so this run cannot judge the patch on it"
        else:
            flags.append(FLAG_ERROR)  # the patched engine failed where base ran (DESIGN: ERROR:run)
        return CheckResult(app.check_name, "app", "failed comparators", criterion, affected, base, patched,
                           reference_observation(), flags, comparison, [], why)
    regressed = regressed_comparators(comparisons["base"], comparisons["patched"])
    if regressed:  # a comparator that held on base breaks, even where another failed on both
        flags.append(FLAG_REGRESSED)
        comparison["regressed"] = regressed
    if not patched.passed:
        flags.append(FLAG_NOT_RESTORED)
    bypassed = workaround_signals(runtime["base"], runtime["patched"], app.record, signals, drift)
    if "throughput" in app.record:
        comparison["throughput"] = throughput_signal(runtime["base"], runtime["patched"], signals, drift)
    if bypassed:
        flags.append(FLAG_WORKAROUND)
        comparison["workaround"] = "; ".join(bypassed)
    examples = [{"variant": v, "comparator": c.comparator, **e} for v in ("base", "patched")
                for c in comparisons[v] for e in c.examples][:6]
    return CheckResult(app.check_name, "app", "failed comparators", criterion, affected, base, patched,
                       reference_observation(), flags, comparison, examples, why)


def regressed_comparators(base: list[cmp.Comparison], patched: list[cmp.Comparison]) -> list[str]:
    """Comparators that pass on base and fail on patched: e.g. burst-vs-solo consistency broken by a
    patch on an app whose reference comparison fails on both (the bug's own damage)."""
    held = {c.comparator for c in base if c.passed}
    return [c.comparator for c in patched if not c.passed and c.comparator in held]


def reference_observation() -> Observation:
    return Observation("reference", None, None, None, None,
                       {"role": "HF transformers float32 (teacher-forced scoring and exact distributions)"})
