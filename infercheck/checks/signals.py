"""Runtime workaround signals of an app: prefix-cache hit-rate collapse, throughput drop beyond the
measured noise, preemption that no longer happens. Pure functions over GroupResult records."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from infercheck.payloads import RuntimeRecord, ThroughputSignal
from infercheck.run.job import GroupResult

HITS, QUERIES, PREEMPTIONS = "vllm:prefix_cache_hits", "vllm:prefix_cache_queries", "vllm:num_preemptions"


@dataclass
class Runtime:
    """An app's engine counters and per-step timings on one variant."""

    tokens_per_s: float | None
    hit_rate: float | None
    preemptions: int | None
    steps: list[dict[str, Any]]
    error: str | None = None  # an app engine that failed (GroupResult.error of its isolated group)
    engine_raised: bool = False  # every failure was the engine raising (not a refused allocation)

    def record(self) -> RuntimeRecord:
        return RuntimeRecord(self.tokens_per_s, self.hit_rate, self.preemptions, len(self.steps))


def runtime_of(groups: list[GroupResult]) -> Runtime:
    tokens = sum(g.prompt_tokens + g.output_tokens for g in groups)
    elapsed = sum(g.elapsed_s for g in groups)
    queries = sum(g.metrics.get(QUERIES, 0.0) for g in groups)
    hits = sum(g.metrics.get(HITS, 0.0) for g in groups)
    preempt = [g.metrics[PREEMPTIONS] for g in groups if PREEMPTIONS in g.metrics]
    failed = [g for g in groups if g.error]
    # a stored row from before error_kind existed says MemoryError in its message
    raised = bool(failed) and all(g.error_kind != "memory" and not str(g.error).startswith("MemoryError")
                                  for g in failed)
    return Runtime(tokens / elapsed if elapsed > 0 else None, hits / queries if queries > 0 else None,
                   int(sum(preempt)) if preempt else None, [s for g in groups for s in g.steps],
                   "; ".join(f"{g.name}: {g.error}" for g in failed) or None, raised)


def step_rate(step: dict[str, Any]) -> float | None:
    elapsed = float(step.get("elapsed_s") or 0.0)
    tokens = int(step.get("prompt_tokens", 0)) + int(step.get("output_tokens", 0))
    return tokens / elapsed if elapsed > 0 and tokens > 0 else None


def step_log_ratios(base_steps: list[dict[str, Any]], patched_steps: list[dict[str, Any]]) -> list[float]:
    pairs = [(step_rate(b), step_rate(p)) for b, p in zip(base_steps, patched_steps)]
    return [math.log(p / b) for b, p in pairs if b and p]


def machine_drift(base: list[GroupResult], patched: list[GroupResult]) -> float:
    """Median log(patched/base tokens/s) over every paired step of the two worker runs: how much
    faster or slower the machine was for the whole patched run (load, a cached base from another
    day). An app's own slowdown is measured against it."""
    by_name = {g.name: g for g in patched}
    logs = [x for g in base if g.name in by_name for x in step_log_ratios(g.steps, by_name[g.name].steps)]
    return statistics.median(logs) if logs else 0.0


def throughput_signal(base: Runtime, patched: Runtime, signals: dict[str, float],
                      drift: float = 0.0) -> ThroughputSignal | None:
    """Slowdown of the same steps on patched vs base beyond the machine's drift, against a
    tolerance from the steps' own noise."""
    from scipy.stats import wilcoxon

    logs = [x - drift for x in step_log_ratios(base.steps, patched.steps)]
    if len(logs) < int(signals["min_steps"]):
        return None
    median = statistics.median(logs)
    mad = statistics.median(abs(x - median) for x in logs)
    tolerance = max(-math.log(1 - signals["throughput_floor"]), signals["noise_factor"] * 1.4826 * mad)
    p_value = float(wilcoxon(logs, alternative="less").pvalue) if any(logs) else 1.0
    slowdown = 1 - math.exp(median)
    drift_fraction = round(math.exp(drift) - 1, 4)
    flagged = median < -tolerance and p_value < signals["alpha"]
    if abs(math.exp(drift) - 1) > signals.get("max_drift", math.inf):
        flagged = False
        why = (f"throughput not judged: the machine's speed changed by {drift_fraction:+.0%} "
               f"between the base and patched runs (more than ±{signals['max_drift']:.0%})")
    else:
        why = (f"throughput down {slowdown:.0%} over {len(logs)} paired steps beyond the whole run's "
               f"drift ({drift_fraction:+.0%}); tolerance {1 - math.exp(-tolerance):.0%} from the "
               f"steps' noise, p={p_value:.2g}")
    return ThroughputSignal(round(slowdown, 4), round(1 - math.exp(-tolerance), 4), p_value, len(logs),
                            drift_fraction, flagged, why)


def workaround_signals(base: Runtime, patched: Runtime, record: tuple[str, ...],
                       signals: dict[str, float], drift: float = 0.0) -> list[str]:
    """Why the app looks bypassed on patched (empty: no sign)."""
    out = []
    if "hit_rate" in record and base.hit_rate is not None and base.hit_rate >= signals["min_base_hit_rate"]:
        patched_rate = patched.hit_rate or 0.0
        if patched_rate < base.hit_rate * (1 - signals["hit_rate_drop"]):
            out.append(f"prefix-cache hit rate collapsed: {base.hit_rate:.1%} on base, {patched_rate:.1%} on patched")
    if "preemptions" in record and (base.preemptions or 0) > 0 and not patched.preemptions:
        out.append(f"preemption no longer happens: {base.preemptions} preemptions on base, 0 on patched "
                   f"with the same KV-cache budget")
    if "throughput" in record:
        drop = throughput_signal(base, patched, signals, drift)
        if drop and drop.flagged:
            out.append(drop.why)
    return out
