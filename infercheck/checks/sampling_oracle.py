"""The sampling oracle's comparators: pure functions over one variant's oracle results and the
reference's rebuilt processing of each (docs/design.md, "Oracles").

Every engine result is one row of the parameter grid, in one batch plan, under one logprobs mode,
with the whole vocabulary at each position (`logprobs=-1`). The reference gives, for the engine's
own sequence, the raw logits and the processed logits (HF's processors in vLLM's order; -inf =
masked) at each position, and the tokens within a hair of a top_p / min_p cut.

- `distributions`: per position, what the mode must return — raw_logprobs = log_softmax(raw),
  raw_logits = raw, processed_logits = processed, processed_logprobs = log_softmax(processed) —
  against what the engine returned: same support (masked ⇔ -inf, borderline tokens excepted),
  max |Δ| on the support within the dtype's tolerance (divided by the temperature below 1: logits
  are scaled by 1/T), KL(reference ‖ engine) within the dtype's max KL.
- `samples`: every sampled token lies in the processed support; a greedy row's token is the
  processed argmax (near ties excepted); the randomized probability integral transforms of all
  sampled tokens under their processed distributions are uniform (Kolmogorov-Smirnov).
- `seeds`: a seeded row gives the same tokens in every plan and mode (alone, beside other rows,
  reversed, staggered — over the shorter length —, on another engine); an unseeded random row,
  run in the plans of one engine, does not repeat itself more often than its reference
  probability allows, nor do an `n > 1` request's completions. (Across engines unseeded rows do repeat: every engine starts from the same seed.)
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass
from typing import Any

from infercheck.app_ids import parse_id
from infercheck.oracle_grid import parse_key
from infercheck.payloads import Comparison, SampleHistogram
from infercheck.run.job import RequestResult

MAX_EXAMPLES = 6
PROCESSED = ("processed_logprobs", "processed_logits")
SAMPLING_EPS = 1e-5
UNDERFLOW_LOGPROB = -87.0  # ln of float32's smallest normal is -87.3: a probability below it is 0
PIT_BINS = 10  # bins of the stored PIT histogram (the report's plot)


@dataclass(frozen=True)
class OracleResult:
    """An oracle result with its place in the grid and its reference."""

    result: RequestResult
    ref: RequestResult
    mode: str
    plan: str
    row: str
    prompt: int
    params: dict[str, Any]

    @property
    def parameter(self) -> str:
        """The parameter the row exercises: its grid field, or "combo" / "seeded" / "n" / "none"."""
        head = self.row.rsplit(".", 1)[0]
        return head.split(".", 1)[1] if head.startswith("greedy.") else head

    @property
    def temperature(self) -> float:
        t = float(self.params.get("temperature", 1.0))
        return 0.0 if t < SAMPLING_EPS else max(t, 0.01)


def oracle_results(results: list[RequestResult], refs: dict[str, RequestResult],
                   params: dict[str, dict[str, Any]]) -> tuple[list[OracleResult], list[str]]:
    """Results placed in the grid, and the ids missing (a failure): planned requests without a
    result (`params` holds every planned id of the oracle) and results without reference processing."""
    got = {r.id for r in results}
    placed, missing = [], sorted(set(params) - got)
    for r in sorted(results, key=lambda r: r.id):
        parsed = parse_id(r.id)
        slot = parse_key(parsed[2]) if parsed else None
        ref = refs.get(r.id)
        if slot is None or ref is None or ref.processed_logits is None or ref.raw_logits is None:
            missing.append(r.id)
            continue
        placed.append(OracleResult(r, ref, parsed[1], slot[0], slot[1], slot[2], params.get(r.id, {})))
    return placed, missing


def log_softmax(row: list[float]) -> list[float]:
    finite = [v for v in row if math.isfinite(v)]
    if not finite:
        return [-math.inf] * len(row)
    top = max(finite)
    lse = top + math.log(sum(math.exp(v - top) for v in finite))
    return [v - lse if math.isfinite(v) else -math.inf for v in row]


def expected_row(o: OracleResult, pos: int) -> list[float]:
    """What the engine must return at `pos` in its mode."""
    raw, processed = o.ref.raw_logits[pos], o.ref.processed_logits[pos]
    return {"raw_logprobs": log_softmax(raw), "raw_logits": list(raw), "processed_logits": list(processed),
            "processed_logprobs": log_softmax(processed)}[o.mode]


def dense(position: list[list[float]] | None, vocab: int) -> list[float] | None:
    """[[token, value], ...] as a value per token id (absent = None: the engine left it out)."""
    if position is None:
        return None
    row: list[float] = [math.nan] * vocab
    for tid, value in position:
        if 0 <= int(tid) < vocab:
            row[int(tid)] = float(value)
    return row


def kl(expected: list[float], engine: list[float]) -> float:
    """KL(expected ‖ engine) of the distributions the two rows imply (logits or logprobs)."""
    p, q = log_softmax(expected), log_softmax(engine)
    total = 0.0
    for lp, lq in zip(p, q):
        if math.isfinite(lp):
            total += math.exp(lp) * (lp - lq) if math.isfinite(lq) else math.inf
    return max(0.0, total)


def excused(o: OracleResult, pos: int) -> set[int]:
    """Tokens either side of a processed cut is right for: those within a hair of a top_p / min_p
    threshold (the reference's borderline), and those whose processed probability underflows
    float32 (the sort path of top-k/top-p masks exact zeros even at top_p = 1)."""
    logprobs = log_softmax(o.ref.processed_logits[pos])
    zero = {t for t, lp in enumerate(logprobs) if math.isfinite(lp) and lp < UNDERFLOW_LOGPROB}
    return zero | (set(o.ref.borderline[pos]) if o.ref.borderline else set())


def without_border(o: OracleResult, expected: list[float], engine: list[float], border: set[int]
                   ) -> tuple[list[float], list[float]]:
    """Both rows with the borderline tokens masked on one side only taken out of both (a logprob
    mode renormalizes what is left), so either side of a hair-thin cut compares equal."""
    split = [t for t in border if math.isfinite(expected[t]) != math.isfinite(engine[t])]
    if not split:
        return expected, engine
    expected, engine = list(expected), list(engine)
    for t in split:
        expected[t] = engine[t] = -math.inf
    if o.mode.endswith("logprobs"):
        expected, engine = log_softmax(expected), log_softmax(engine)
    return expected, engine


def position_problems(o: OracleResult, pos: int, tolerance: float, max_kl: float) -> dict[str, Any] | None:
    """The worst disagreement at one position, or None when it matches."""
    expected = expected_row(o, pos)
    engine = dense(o.result.logprobs[pos] if o.result.logprobs and pos < len(o.result.logprobs) else None,
                   len(expected))
    if engine is None:
        return {"position": pos, "why": "the engine returned no logprobs here"}
    tokens = range(len(expected))
    bad_values = [t for t in tokens if math.isnan(engine[t]) or engine[t] == math.inf]
    if bad_values:
        return {"position": pos, "token": bad_values[0], "bad_values": len(bad_values),
                "why": f"{len(bad_values)} NaN / +inf values (e.g. token {bad_values[0]})"}
    border = excused(o, pos) if o.mode in PROCESSED else set()
    expected, engine = without_border(o, expected, engine, border)
    support = [t for t in tokens if math.isfinite(expected[t]) != math.isfinite(engine[t])]
    both = [t for t in tokens if math.isfinite(expected[t]) and math.isfinite(engine[t])]
    worst = max(both, key=lambda t: abs(engine[t] - expected[t]), default=None)
    delta = abs(engine[worst] - expected[worst]) if worst is not None else 0.0
    divergence = math.inf if support else kl(expected, engine)
    if not support and delta <= tolerance and divergence <= max_kl:
        return None
    t = support[0] if support else worst
    out: dict[str, Any] = {"position": pos, "max_abs_delta": delta, "kl": divergence, "support_mismatch": len(support)}
    if t is not None:
        out |= {"token": t, "engine": engine[t], "expected": expected[t]}
    return out


def row_tolerance(o: OracleResult, tolerance: float) -> float:
    """Processed values are scaled by 1/T: so is their float error."""
    t = o.temperature
    return tolerance / t if o.mode in PROCESSED and 0 < t < 1 else tolerance


def row_problem(o: OracleResult, tolerance: float, max_kl: float) -> dict[str, Any] | None:
    """The worst position of one result that disagrees, with its row's place in the grid."""
    problems = [p for pos in range(len(o.result.output_ids))
                if (p := position_problems(o, pos, row_tolerance(o, tolerance), max_kl))]
    if not problems:
        return None
    worst = max(problems, key=lambda p: (p.get("support_mismatch", 0), p.get("max_abs_delta", math.inf)))
    return {"parameter": o.parameter, "row": o.row, "plan": o.plan, "mode": o.mode, "prompt": o.prompt,
            "params": o.params, "positions_failed": len(problems), "output_ids": o.result.output_ids, **worst}


def table(placed: list[OracleResult], failures: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """parameter × plan × mode: results, failures, and the worst failure's one-line description."""
    cells: dict[tuple[str, str, str], dict[str, Any]] = {}
    for o in placed:
        plan = o.plan.split(".")[0]
        cell = cells.setdefault((o.parameter, plan, o.mode), {"parameter": o.parameter, "plan": plan,
                                                               "mode": o.mode, "results": 0, "failed": 0, "worst": ""})
        cell["results"] += 1
        if (f := failures.get(o.result.id)) is not None:
            cell["failed"] += 1
            cell["worst"] = cell["worst"] or describe(f)
    return sorted(cells.values(), key=lambda c: (c["failed"] == 0, c["parameter"], c["plan"], c["mode"]))


def describe(f: dict[str, Any]) -> str:
    """One failure in one line: the row, where, and the values."""
    where = f"{f['row']} ({', '.join(f'{k}={v}' for k, v in f['params'].items())}) {f['plan']}/{f['mode']} pos {f['position']}"
    if "why" in f:
        return f"{where}: {f['why']}"
    if "token" not in f:
        return f"{where}: KL {f['kl']:.3g}"
    if f.get("support_mismatch"):
        return (f"{where}: {f['support_mismatch']} tokens masked on one side only, e.g. token {f['token']} "
                f"engine {f['engine']:.4g} vs reference {f['expected']:.4g}")
    return (f"{where}: max |Δ| {f['max_abs_delta']:.3g} (token {f.get('token')}: engine {f.get('engine', math.nan):.6g}"
            f" vs reference {f.get('expected', math.nan):.6g}), KL {f['kl']:.3g}")


def compare_distributions(results: list[RequestResult], refs: dict[str, RequestResult],
                          params: dict[str, dict[str, Any]], tolerance: float, max_kl: float) -> Comparison:
    placed, missing = oracle_results(results, refs, params)
    failures = {o.result.id: f for o in placed if (f := row_problem(o, tolerance, max_kl))}
    cells = table(placed, failures)
    bad_params = sorted({f["parameter"] for f in failures.values()})
    ok = bool(placed) and not failures and not missing
    summary = (f"{len(placed) - len(failures)}/{len(placed)} row × plan × mode results match the reference "
               f"at every position")
    if bad_params:
        summary += f"; failing parameters: {', '.join(bad_params)}"
    if missing:
        summary += f"; {len(missing)} without a reference"
    examples = sorted(failures.values(), key=lambda f: (f["parameter"], f["plan"], f["mode"]))
    return Comparison("distributions", ok, float(len(failures) + len(missing)), summary,
                      {"failing_parameters": bad_params, "failing_cells": cells_of(failures.values()), "table": cells,
                       "tolerance": tolerance, "max_kl": max_kl, "missing": missing[:MAX_EXAMPLES]},
                      [{"parameter": f["parameter"], "failure": describe(f)} for f in spread(examples)])


def cells_of(failures: Any) -> list[str]:
    """parameter@mode of each failure: the unit regression is judged in (app_check.regressed_comparators)."""
    return sorted({f"{f['parameter']}@{f['mode']}" for f in failures})


def spread(failures: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Up to MAX_EXAMPLES failures, one per parameter first."""
    first = {f["parameter"]: f for f in reversed(failures)}
    chosen = list(first.values())[:MAX_EXAMPLES]
    return chosen + [f for f in failures if f not in chosen][:MAX_EXAMPLES - len(chosen)]


# ---- samples: sampled tokens against the processed distributions ---------------------------------

def sample_checks(o: OracleResult, rng: random.Random, near_tie: float) -> tuple[list[float], list[dict[str, Any]]]:
    """The PIT value of each sampled token of a random row, and the tokens that could not have been
    sampled (outside the support; for a greedy row, not the processed argmax)."""
    pits, bad = [], []
    for pos, token in enumerate(o.result.output_ids):
        probs = [math.exp(v) for v in log_softmax(o.ref.processed_logits[pos])]
        border = set(o.ref.borderline[pos]) if o.ref.borderline else set()
        if o.temperature == 0.0:
            best = max(range(len(probs)), key=lambda t: probs[t])
            gap = math.log(probs[best]) - (math.log(probs[token]) if probs[token] > 0 else -math.inf)
            if gap > near_tie:
                bad.append({"position": pos, "token": token, "expected": best, "why": "not the processed argmax"})
            continue
        if probs[token] == 0.0 and token not in border:
            bad.append({"position": pos, "token": token, "why": "outside the processed support"})
            continue
        order = sorted(range(len(probs)), key=lambda t: (-probs[t], t))
        before = sum(probs[t] for t in order[:order.index(token)])
        pits.append(min(1.0, before + rng.random() * probs[token]))
    return pits, bad


def independent(placed: list[OracleResult]) -> list[OracleResult]:
    """The draws that are independent samples: one mode's (every engine starts from the same seed,
    so the other modes repeat its unseeded draws), and each seeded (row, prompt) once."""
    first_mode = min((o.mode for o in placed), key=lambda m: (m not in PROCESSED, m), default=None)
    seen: set[tuple[str, int]] = set()
    out = []
    for o in placed:
        if o.mode != first_mode or ("seed" in o.params and (o.row, o.prompt) in seen):
            continue
        seen.add((o.row, o.prompt))
        out.append(o)
    return out


def pit_histogram(pits: list[float]) -> SampleHistogram:
    """The PIT values in PIT_BINS equal bins beside the uniform counts a sampler true to the
    processed reference distribution gives."""
    counts = [0] * PIT_BINS
    for value in pits:
        counts[min(int(value * PIT_BINS), PIT_BINS - 1)] += 1
    bins = [f"{i / PIT_BINS:.1f}–{(i + 1) / PIT_BINS:.1f}" for i in range(PIT_BINS)]
    return SampleHistogram("every random row's sampled tokens", "PIT of the sampled token under the processed "
                           "reference", bins, counts, [round(len(pits) / PIT_BINS, 2)] * PIT_BINS)


def compare_samples(results: list[RequestResult], refs: dict[str, RequestResult], params: dict[str, dict[str, Any]],
                    alpha: float, near_tie: float) -> Comparison:
    from scipy.stats import kstest

    placed, missing = oracle_results(results, refs, params)
    rng = random.Random(0)
    pits: list[float] = []
    bad: list[dict[str, Any]] = []
    for o in independent(placed):
        values, wrong = sample_checks(o, rng, near_tie)
        pits += values
        bad += [{"parameter": o.parameter, "row": o.row, "plan": o.plan, "mode": o.mode, "params": o.params, **w}
                for w in wrong]
    p_value = float(kstest(pits, "uniform").pvalue) if len(pits) >= 20 else None
    ok = bool(placed) and not bad and not missing and p_value is not None and p_value >= alpha
    bad_params = sorted({b["parameter"] for b in bad})
    summary = (f"{len(pits)} sampled tokens, PIT uniformity p {p_value:.3g}" if p_value is not None
               else f"{len(pits)} sampled tokens (too few for a uniformity test)")
    summary += f"; {len(bad)} impossible tokens" + (f" (parameters: {', '.join(bad_params)})" if bad_params else "")
    return Comparison("samples", ok, p_value, summary,
                      {"sampled": len(pits), "pit_p_value": p_value, "alpha": alpha, "impossible": len(bad),
                       "failing_parameters": bad_params, "failing_cells": cells_of(bad),
                       "pit_histogram": asdict(pit_histogram(pits))}, spread(bad))


# ---- seeds: seeded rows repeat, unseeded ones do not ---------------------------------------------

def sequence_logprob(o: OracleResult, ids: list[int]) -> float:
    """log P(ids) under the processed reference along the engine's own sequence (`ids` = its tokens)."""
    return sum(log_softmax(o.ref.processed_logits[pos])[t] for pos, t in enumerate(ids))


def agree(a: list[int], b: list[int]) -> bool:
    """Equal over the shorter one's length: a staggered row stops early, its seeded draws do not change."""
    k = min(len(a), len(b))
    return a[:k] == b[:k]


def compare_seeds(results: list[RequestResult], refs: dict[str, RequestResult], params: dict[str, dict[str, Any]],
                  alpha: float) -> Comparison:
    placed, missing = oracle_results(results, refs, params)
    runs: dict[tuple[str, int, str], list[OracleResult]] = {}
    for o in placed:  # a seeded row repeats across engines too; an unseeded one only within one
        if o.temperature > 0:
            runs.setdefault((o.row, o.prompt, "" if "seed" in o.params else o.mode), []).append(o)
    problems, seeded_pairs, unseeded_groups = [], 0, 0
    for (row, prompt, _), seen in sorted(runs.items()):
        first = max(seen, key=lambda o: len(o.result.output_ids))
        seen = [first] + [o for o in seen if o is not first]
        same = [o for o in seen[1:] if agree(o.result.output_ids, first.result.output_ids)]
        if "seed" in first.params:
            seeded_pairs += len(seen) - 1
            problems += [{"parameter": o.parameter, "row": row, "why": "a seeded row gave other tokens",
                          "a": f"{first.plan}/{first.mode}", "b": f"{o.plan}/{o.mode}",
                          "a_ids": first.result.output_ids, "b_ids": o.result.output_ids}
                         for o in seen[1:] if o not in same]
        elif len(seen) > 1:
            unseeded_groups += 1
            shortest = min(len(o.result.output_ids) for o in seen)
            chance = (len(seen) - 1) * sequence_logprob(first, first.result.output_ids[:shortest])
            if len(same) == len(seen) - 1 and chance < math.log(alpha):
                problems.append({"parameter": first.parameter, "row": row, "runs": len(seen),
                                 "why": f"an unseeded row repeated its tokens in all {len(seen)} runs "
                                        f"(chance e^{chance:.1f})"})
    for o in placed:
        completions = o.result.completions or []
        if len(completions) > 1 and o.mode in PROCESSED and all(c["ids"] == o.result.output_ids for c in completions):
            chance = (len(completions) - 1) * sequence_logprob(o, o.result.output_ids)
            if chance < math.log(alpha):
                problems.append({"parameter": o.parameter, "row": o.row, "why": f"all {len(completions)} "
                                 f"completions of an n>1 request are identical (chance e^{chance:.1f})"})
    ok = bool(placed) and seeded_pairs > 0 and not problems and not missing
    summary = (f"{seeded_pairs} repeats of seeded rows, {unseeded_groups} unseeded rows run repeatedly; "
               f"{len(problems)} problems")
    return Comparison("seeds", ok, float(len(problems)), summary,
                      {"seeded_repeats": seeded_pairs, "unseeded_rows": unseeded_groups, "problems": len(problems),
                       "failing_parameters": sorted({p["parameter"] for p in problems})}, spread(problems))
