"""Accuracy suites (lm-eval per-sample 0/1 results) as CheckResults with paired statistics."""

from __future__ import annotations

from typing import Any

from infercheck.checks.records import (FLAG_NOT_RESTORED, FLAG_REGRESSED, FLAG_UNDERPOWERED, CheckResult,
                                       Observation)
from infercheck.checks.stats import compare_paired, wilson_interval

ALPHA = 0.05


def per_sample(rows: list[dict[str, Any]], suite: str, metric: str) -> dict[int, int]:
    """doc_id -> 0/1 for one suite's metric."""
    return {int(r["doc_id"]): int(round(r["metrics"][metric])) for r in rows
            if r.get("suite") == suite and metric in r.get("metrics", {})}


def observe(variant: str, values: list[int]) -> Observation:
    n, right = len(values), sum(values)
    return Observation(variant, right / n if n else None, None, wilson_interval(right, n), n)


def accuracy_check(suite: str, metric: str, tolerance: float, samples: dict[str, dict[int, int]],
                   affected: bool, why: str = "") -> CheckResult:
    """Base vs patched (regression) and patched vs reference (restored), paired on common samples."""
    common = sorted(set(samples["base"]) & set(samples["patched"]) & set(samples["reference"]))
    vec = {v: [samples[v][d] for d in common] for v in ("base", "patched", "reference")}
    obs = {v: observe(v, vec[v]) for v in vec}
    flags: list[str] = []
    comparison: dict[str, Any] = {"tolerance": tolerance, "paired_samples": len(common)}
    if not common:
        return CheckResult(suite, "accuracy", metric, "no common samples", affected, obs["base"], obs["patched"],
                           obs["reference"], [FLAG_UNDERPOWERED], comparison, [], why)
    base_vs_patched = compare_paired(vec["base"], vec["patched"], tolerance)
    ref_vs_base = compare_paired(vec["reference"], vec["base"], tolerance)
    ref_vs_patched = compare_paired(vec["reference"], vec["patched"], tolerance)
    obs["base"].passed = not ref_vs_base.regression
    obs["patched"].passed = not ref_vs_patched.regression
    obs["reference"].passed = True
    if obs["base"].passed and base_vs_patched.regression:
        flags.append(FLAG_REGRESSED)
    if not obs["patched"].passed:
        flags.append(FLAG_NOT_RESTORED)
    # A comparison with a significant difference (either way) is decided whatever its power; an
    # undecided one whose minimum detectable effect exceeds the tolerance cannot rule a drop out.
    undecided = [c for c in (base_vs_patched, ref_vs_patched) if c.p_value >= ALPHA]
    if any(c.underpowered for c in undecided):
        flags.append(FLAG_UNDERPOWERED)
    comparison.update({"base_vs_patched": base_vs_patched.to_dict(), "reference_vs_patched": ref_vs_patched.to_dict(),
                       "reference_vs_base": ref_vs_base.to_dict()})
    criterion = (f"{metric}: not significantly (McNemar p < 0.05) below the reference by more than {tolerance:g}; "
                 f"a significant drop of more than {tolerance:g} from base is a regression")
    return CheckResult(suite, "accuracy", metric, criterion, affected, obs["base"], obs["patched"], obs["reference"],
                       flags, comparison, [], why)
