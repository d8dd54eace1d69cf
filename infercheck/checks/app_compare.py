"""Comparators of the neighbouring applications: pure functions over stored results.

Each takes one variant's results of one app (and, where it needs it, the reference's scoring of
them) and returns a Comparison: passed, one headline number, a one-line summary, details and
examples for the report. Request ids are `app/<name>#<set>/<key>` (apps.py), so comparators pair
the same key across sets.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from typing import Any

from infercheck.app_ids import parse_id
from infercheck.checks.parity import parity_stats, position_series, teacher_forced, within_tolerance
from infercheck.payloads import Comparison, SampleHistogram
from infercheck.run.job import RequestResult

MAX_EXAMPLES = 3
MAX_BARS = 12  # tokens of a sampler histogram besides the impossible ones; the rest pooled as "other"


def by_set(results: list[RequestResult]) -> dict[str, dict[str, RequestResult]]:
    """set -> key -> result."""
    out: dict[str, dict[str, RequestResult]] = {}
    for r in results:
        parsed = parse_id(r.id)
        if parsed:
            out.setdefault(parsed[1], {})[parsed[2]] = r
    return out


# ---- reference: teacher-forced parity ------------------------------------------------------------

def compare_reference(results: list[RequestResult], refs: dict[str, RequestResult],
                      profile: dict[str, float]) -> Comparison:
    greedy = [r for r in results if r.id in refs and r.completions is None]
    if not greedy:
        return Comparison("reference", False, None, "no reference scoring for this app's outputs")
    rows = teacher_forced(greedy, refs, profile["near_tie"])
    stats = parity_stats(rows)
    ok, reasons = within_tolerance(stats, profile)
    summary = (f"{len(greedy)} outputs, {stats.positions} positions: max KL {stats.max_kl:.2g}, "
               f"max |Δlogprob| {stats.max_abs_dlogprob:.2g}, top-1 {stats.top1_agreement:.3f}")
    detail = {"max_kl": stats.max_kl, "mean_kl": stats.mean_kl, "max_abs_dlogprob": stats.max_abs_dlogprob,
              "top1_agreement": stats.top1_agreement, "diverged": stats.diverged_requests[:MAX_EXAMPLES],
              "per_position": asdict(position_series(rows))}  # payloads.PositionSeries, for the report's plot
    if reasons:
        detail["failed_on"] = reasons
    return Comparison("reference", ok, stats.max_kl, summary, detail)


# ---- consistency: two sets of the same requests must agree -----------------------------------

def logprob_of(result: RequestResult, pos: int, token: int) -> float | None:
    for tid, lp in (result.logprobs or [])[pos] if result.logprobs and pos < len(result.logprobs) else []:
        if int(tid) == token:
            return float(lp)
    return None


def divergence(a: RequestResult, b: RequestResult, near_tie: float) -> dict[str, Any] | None:
    """The first position where b's tokens leave a's, unless it is a near tie in a's own logprobs."""
    for pos, (ta, tb) in enumerate(zip(a.output_ids, b.output_ids)):
        if ta == tb:
            continue
        lp_a, lp_b = logprob_of(a, pos, ta), logprob_of(a, pos, tb)
        gap = abs(lp_a - lp_b) if lp_a is not None and lp_b is not None else math.inf
        if gap <= near_tie:
            return None  # a flip between (near) equals; what follows is not comparable
        return {"position": pos, "a_token": ta, "b_token": tb, "gap_nats": gap if math.isfinite(gap) else None,
                "a_text": a.text, "b_text": b.text}
    if len(a.output_ids) != len(b.output_ids):
        return {"position": min(len(a.output_ids), len(b.output_ids)), "a_text": a.text, "b_text": b.text,
                "lengths": [len(a.output_ids), len(b.output_ids)]}
    return None


def compare_consistency(results: list[RequestResult], set_a: str, set_b: str, near_tie: float) -> Comparison:
    sets = by_set(results)
    a, b = sets.get(set_a, {}), sets.get(set_b, {})
    keys = sorted(set(a) & set(b))
    missing = sorted(set(b) - set(a))
    diffs = [{"key": k, **d} for k in keys if (d := divergence(b[k], a[k], near_tie))]
    ok = bool(keys) and not diffs and not missing
    summary = f"{len(keys) - len(diffs)}/{len(keys)} of {set_a!r} equal {set_b!r}" + \
        (f"; {len(missing)} missing" if missing else "")
    return Comparison("consistency", ok, float(len(diffs)), summary,
                      {"pairs": len(keys), "mismatches": len(diffs), "missing": missing[:MAX_EXAMPLES]},
                      diffs[:MAX_EXAMPLES])


# ---- seeded: same seed, same samples ------------------------------------------------------------

def compare_seeded(results: list[RequestResult]) -> Comparison:
    runs: dict[str, list[tuple[str, RequestResult]]] = {}
    for set_name, members in by_set(results).items():
        if set_name == "filler":
            continue
        for key, r in members.items():
            runs.setdefault(key, []).append((set_name, r))
    diffs = []
    for key, seen in sorted(runs.items()):
        first_set, first = seen[0]
        for set_name, r in seen[1:]:
            if r.output_ids != first.output_ids:
                diffs.append({"key": key, "sets": [first_set, set_name], "a_text": first.text, "b_text": r.text})
    compared = sum(len(v) - 1 for v in runs.values())
    ok = compared > 0 and not diffs
    return Comparison("seeded", ok, float(len(diffs)),
                      f"{compared - len(diffs)}/{compared} repeats of a seeded request gave the same tokens",
                      {"repeats": compared, "mismatches": len(diffs)}, diffs[:MAX_EXAMPLES])


# ---- sampler: chi-square against the exact distribution the reference implies ------------------

def softmax(values: dict[int, float]) -> dict[int, float]:
    finite = {t: v for t, v in values.items() if math.isfinite(v)}
    top = max(finite.values())
    exps = {t: math.exp(v - top) for t, v in finite.items()}
    total = sum(exps.values())
    return {t: exps.get(t, 0.0) / total for t in values}


def sampling_distribution(logprobs: dict[int, float], params: dict[str, Any]) -> dict[int, float]:
    """The exact next-token distribution vLLM's sampler implies: temperature, then min-p, then
    top-k, then top-p over what remains (vllm/v1/sample/sampler.py order)."""
    temperature = float(params.get("temperature", 1.0))
    probs = softmax({t: lp / temperature for t, lp in logprobs.items()})
    min_p = float(params.get("min_p") or 0.0)
    if min_p > 0:
        cut = min_p * max(probs.values())
        probs = {t: (p if p >= cut else 0.0) for t, p in probs.items()}
    top_k = int(params.get("top_k") or 0)
    if 0 < top_k < len(probs):
        kept = set(sorted(probs, key=lambda t: -probs[t])[:top_k])
        probs = {t: (p if t in kept else 0.0) for t, p in probs.items()}
    total = sum(probs.values())
    probs = {t: p / total for t, p in probs.items()}
    top_p = float(params.get("top_p") or 1.0)
    if top_p < 1.0:
        ascending = sorted((t for t in probs if probs[t] > 0), key=lambda t: probs[t])
        cumulative, masked = 0.0, set()
        for t in ascending[:-1]:  # the most likely token always stays
            cumulative += probs[t]
            if cumulative <= 1 - top_p:
                masked.add(t)
        probs = {t: (0.0 if t in masked else p) for t, p in probs.items()}
        total = sum(probs.values())
        probs = {t: p / total for t, p in probs.items()}
    return probs


def chi_square(counts: dict[int, int], probs: dict[int, float], min_expected: float) -> tuple[float, float, int]:
    """Goodness of fit over the support; tokens expected fewer than `min_expected` times are pooled.
    Returns (statistic, p-value, degrees of freedom)."""
    from scipy.stats import chisquare

    n = sum(counts.values())
    support = sorted((t for t, p in probs.items() if p > 0), key=lambda t: -probs[t])
    observed, expected, pool_o, pool_e = [], [], 0, 0.0
    for t in support:
        if n * probs[t] >= min_expected:
            observed.append(counts.get(t, 0))
            expected.append(n * probs[t])
        else:
            pool_o, pool_e = pool_o + counts.get(t, 0), pool_e + n * probs[t]
    if pool_e > 0:
        if pool_e >= min_expected or not expected:
            observed.append(pool_o)
            expected.append(pool_e)
        else:  # too small to stand alone: fold into the smallest bin
            observed[-1] += pool_o
            expected[-1] += pool_e
    if len(observed) < 2:
        return 0.0, 1.0, 0
    scale = sum(observed) / sum(expected)
    stat, p = chisquare(observed, [e * scale for e in expected])
    return float(stat), float(p), len(observed) - 1


def token_histogram(label: str, counts: dict[int, int], probs: dict[int, float]) -> SampleHistogram:
    """Sampled counts beside the counts `probs` expects: its MAX_BARS likeliest tokens, then every
    sampled token it gives no probability, then the rest pooled as "other"."""
    n = sum(counts.values())
    likeliest = sorted((t for t, p in probs.items() if p > 0), key=lambda t: (-probs[t], t))
    shown = likeliest[:MAX_BARS] + sorted(t for t in counts if probs.get(t, 0.0) == 0.0)
    rest = (set(counts) | set(likeliest)) - set(shown)
    out = SampleHistogram(label, "sampled token id", [str(t) for t in shown], [counts.get(t, 0) for t in shown],
                          [round(n * probs.get(t, 0.0), 2) for t in shown])
    if rest:
        out.bins.append("other")
        out.observed.append(sum(counts.get(t, 0) for t in rest))
        out.expected.append(round(n * sum(probs.get(t, 0.0) for t in rest), 2))
    return out


def failure_line(failure: dict[str, Any]) -> str:
    """Which combination failed and how: out-of-support samples or a low p-value."""
    if "params" not in failure:
        return f"{failure['request']}: {failure.get('why', 'failed')}"
    params = ", ".join(f"{k}={v}" for k, v in failure["params"].items())
    if failure["impossible_samples"]:
        return (f"{params}: {failure['impossible_samples']}/{failure['samples']} samples outside the "
                f"{failure['support']} tokens the parameters allow")
    return f"{params}: chi-square p {failure['p_value']:.2g}"


def compare_sampler(results: list[RequestResult], refs: dict[str, RequestResult], params: dict[str, dict[str, Any]],
                    alpha: float, min_expected: float) -> Comparison:
    """params: result id -> its sampling params. Bonferroni over the combinations."""
    rows, failures, histograms = [], [], []
    per_test = alpha / max(1, len(results))
    for r in sorted(results, key=lambda r: r.id):
        ref = refs.get(r.id)
        if ref is None or not ref.logprobs:
            failures.append({"request": r.id, "why": "no reference distribution"})
            continue
        probs = sampling_distribution({int(t): float(lp) for t, lp in ref.logprobs[0]}, params[r.id])
        counts: dict[int, int] = {}
        for c in r.completions or [{"ids": r.output_ids}]:
            if c["ids"]:
                counts[int(c["ids"][0])] = counts.get(int(c["ids"][0]), 0) + 1
        impossible = {t: n for t, n in counts.items() if probs.get(t, 0.0) == 0.0}
        stat, p, dof = chi_square(counts, probs, min_expected)
        sampling = {k: v for k, v in params[r.id].items() if k in ("temperature", "top_k", "top_p", "min_p")}
        row = {"request": r.id, "params": sampling, "samples": sum(counts.values()), "support": sum(1 for v in probs.values() if v > 0),
               "chi2": round(stat, 3), "dof": dof, "p_value": p, "impossible_samples": sum(impossible.values())}
        rows.append(row)
        histograms.append(asdict(token_histogram(", ".join(f"{k}={v}" for k, v in sampling.items()), counts, probs)))
        if impossible or p < per_test:
            failures.append({**row, "observed": {str(t): n for t, n in sorted(counts.items())},
                             "expected": {str(t): round(sum(counts.values()) * q, 1) for t, q in sorted(probs.items()) if q > 0}})
    min_p = min((row["p_value"] for row in rows), default=None)
    ok = bool(rows) and not failures
    summary = (f"{len(rows) - len(failures)}/{len(rows)} sampling combinations fit the reference distribution"
               f" (min p {min_p:.3g}, per-test alpha {per_test:.2g})" if min_p is not None else "no samples")
    summary += "".join(f"; {failure_line(f)}" for f in failures[:3])
    return Comparison("sampler", ok, min_p, summary, {"combinations": rows, "alpha": alpha, "histograms": histograms},
                      failures[:MAX_EXAMPLES])


# ---- logprobs: raw and processed, sample and prompt ----------------------------------------------

def log_softmax_at(row: dict[int, float], temperature: float) -> dict[int, float]:
    scaled = {t: v / temperature for t, v in row.items()}
    top = max(scaled.values())
    lse = top + math.log(sum(math.exp(v - top) for v in scaled.values()))
    return {t: v - lse for t, v in scaled.items()}


def position_errors(engine_rows: list[list[list[float]] | None], ref_rows: list[list[list[float]] | None],
                    temperature: float) -> tuple[float, int]:
    """Max |engine - expected| over every listed token, and the positions compared. A masked token
    (-inf) is skipped; a NaN or +inf logprob is an infinite error, never a silent pass."""
    worst, compared = 0.0, 0
    for engine, ref in zip(engine_rows, ref_rows):
        if not engine or not ref:
            continue
        expected = log_softmax_at({int(t): float(v) for t, v in ref}, temperature)
        for tid, lp in engine:
            if math.isnan(lp) or lp == math.inf:
                worst = math.inf
            elif math.isfinite(lp) and int(tid) in expected:
                worst = max(worst, abs(float(lp) - expected[int(tid)]))
        compared += 1
    return worst, compared


def compare_logprobs(results: list[RequestResult], refs: dict[str, RequestResult], processed_temperature: float,
                     tolerance: float) -> Comparison:
    sets = by_set(results)
    checks: dict[str, tuple[float, int]] = {}
    for mode, temperature in (("raw", 1.0), ("processed", processed_temperature)):
        members = [r for r in sets.get(mode, {}).values() if r.id in refs]
        errs = [position_errors(r.logprobs or [], refs[r.id].logprobs or [], temperature) for r in members]
        checks[f"{mode} sample logprobs"] = (max((e for e, _ in errs), default=math.inf),
                                             sum(n for _, n in errs))
    prompt_errs = [position_errors(r.prompt_logprobs or [], refs[r.id].prompt_logprobs or [], 1.0)
                   for r in sets.get("raw", {}).values() if r.id in refs and r.prompt_logprobs]
    checks["prompt logprobs"] = (max((e for e, _ in prompt_errs), default=math.inf), sum(n for _, n in prompt_errs))
    failed = [name for name, (err, n) in checks.items() if n == 0 or err > tolerance]
    worst = max(err for err, _ in checks.values())
    summary = "; ".join(f"{name}: max |Δ| {err:.2g} over {n} positions" for name, (err, n) in checks.items())
    return Comparison("logprobs", not failed, worst, summary,
                      {name: {"max_abs_delta": err, "positions": n} for name, (err, n) in checks.items()} |
                      {"tolerance": tolerance, "failed": failed})


# ---- structured output ---------------------------------------------------------------------------

def schema_errors(value: Any, schema: dict[str, Any], path: str = "$") -> list[str]:
    """The subset of JSON Schema the apps use: type, properties, required, additionalProperties,
    enum, minimum, maximum."""
    kind = schema.get("type")
    types = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}
    if kind == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            return [f"{path}: not an integer"]
    elif kind == "number":
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return [f"{path}: not a number"]
    elif kind in types and not isinstance(value, types[kind]):
        return [f"{path}: not {kind}"]
    errors = []
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: not one of {schema['enum']}")
    if "minimum" in schema and isinstance(value, (int, float)) and value < schema["minimum"]:
        errors.append(f"{path}: below {schema['minimum']}")
    if "maximum" in schema and isinstance(value, (int, float)) and value > schema["maximum"]:
        errors.append(f"{path}: above {schema['maximum']}")
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        errors += [f"{path}: missing {k!r}" for k in schema.get("required") or [] if k not in value]
        if schema.get("additionalProperties") is False:
            errors += [f"{path}: unexpected {k!r}" for k in value if k not in props]
        for k, v in value.items():
            if k in props:
                errors += schema_errors(v, props[k], f"{path}.{k}")
    return errors


def constrained_step_errors(result: RequestResult, ref: RequestResult, near_tie: float) -> list[dict[str, Any]]:
    """Steps where the engine's token is not the reference's best among the tokens the grammar
    allowed (the engine's finite logprobs at that step)."""
    out = []
    for pos, (token, engine_row, ref_row) in enumerate(zip(result.output_ids, result.logprobs or [], ref.logprobs or [])):
        allowed = {int(t) for t, lp in engine_row if math.isfinite(lp)}
        ref_lp = {int(t): float(lp) for t, lp in ref_row}
        candidates = [t for t in allowed if t in ref_lp]
        if not candidates:
            continue
        best = max(candidates, key=lambda t: ref_lp[t])
        gap = ref_lp[best] - ref_lp.get(token, -math.inf)
        if token not in allowed or gap > near_tie:
            out.append({"request": result.id, "position": pos, "engine_token": token, "reference_best_allowed": best,
                        "gap_nats": gap if math.isfinite(gap) else None, "allowed": len(allowed)})
    return out


def compare_structured(results: list[RequestResult], refs: dict[str, RequestResult], schema: dict[str, Any],
                       near_tie: float) -> Comparison:
    invalid, steps = [], []
    for r in sorted(results, key=lambda r: r.id):
        try:
            errors = schema_errors(json.loads(r.text), schema)
        except json.JSONDecodeError as exc:
            errors = [f"not JSON: {exc.msg}"]
        if errors:
            invalid.append({"request": r.id, "text": r.text, "errors": errors[:3], "finish_reason": r.finish_reason})
        if r.id in refs:
            steps += constrained_step_errors(r, refs[r.id], near_tie)
    scored = sum(1 for r in results if r.id in refs)
    ok = bool(results) and not invalid and not steps and scored == len(results)
    summary = (f"{len(results) - len(invalid)}/{len(results)} outputs valid against the schema; "
               f"{len(steps)} constrained steps off the reference's best allowed token")
    return Comparison("structured", ok, float(len(invalid) + len(steps)), summary,
                      {"invalid": len(invalid), "off_steps": len(steps), "outputs": [r.text for r in results][:4]},
                      (invalid + steps)[:MAX_EXAMPLES])


# ---- stop strings and n > 1 ----------------------------------------------------------------------

def cut_at_stop(text: str, stops: list[str], include: bool = False) -> tuple[str, bool]:
    """The text a stopped request returns: generation ends at the stop string that completes first
    (ties by list order), cut before it, or after it with include_stop_str_in_output."""
    hits = [(i + len(s), i) for s in stops if (i := text.find(s)) >= 0]
    if not hits:
        return text, False
    end, start = min(hits, key=lambda h: h[0])  # the first of equal ends: list order
    return (text[:end] if include else text[:start]), True


def compare_stop(results: list[RequestResult], stops: list[str], n: int, max_tokens: int,
                 include: bool = False) -> Comparison:
    sets = by_set(results)
    free, stopped, sampled = sets.get("free", {}), sets.get("stop", {}), sets.get("n", {})
    problems, triggered = [], 0
    for key in sorted(free):
        expected, hit = cut_at_stop(free[key].text, stops, include)
        got = stopped.get(key)
        triggered += hit
        want_reason = "stop" if hit else "length"
        if got is None or got.text != expected or got.finish_reason != want_reason:
            problems.append({"key": key, "want": expected, "want_finish": want_reason,
                             "got": None if got is None else got.text, "got_finish": None if got is None else got.finish_reason})
    for key, r in sorted(sampled.items()):
        completions = r.completions or [{"ids": r.output_ids, "text": r.text, "finish_reason": r.finish_reason}]
        bad = [c for c in completions if not completion_stopped_right(c, stops, include, max_tokens)]
        if len(completions) != n or bad:
            problems.append({"key": key, "n": len(completions), "want_n": n,
                             "bad": [{"text": c["text"], "finish": c["finish_reason"]} for c in bad[:2]]})
    ok = bool(free) and bool(sampled) and not problems
    summary = (f"{len(free) + len(sampled) - len(problems)}/{len(free) + len(sampled)} requests right; "
               f"a stop string occurred in {triggered}/{len(free)} free outputs")
    return Comparison("stop", ok, float(len(problems)), summary,
                      {"stop_triggered": triggered, "problems": len(problems)}, problems[:MAX_EXAMPLES])


def completion_stopped_right(completion: dict[str, Any], stops: list[str], include: bool, max_tokens: int) -> bool:
    """A sampled completion ends at its first stop string (kept only with `include`), or runs to
    max_tokens without one."""
    text = completion["text"]
    cut, hit = cut_at_stop(text, stops, include)
    if completion["finish_reason"] == "length":
        return not hit and len(completion["ids"]) == max_tokens
    return cut == text and hit == include
