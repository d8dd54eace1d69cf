"""Accuracy suites (lm-eval per-sample 0/1 results) as CheckResults with paired statistics."""

from __future__ import annotations

from typing import Any

from infercheck.checks.stats import compare_paired, wilson_interval
from infercheck.names import CheckFlag, CheckKind, Variant
from infercheck.payloads import AccuracyPayload
from infercheck.records import CheckResult, Observation

ALPHA = 0.05


def per_sample(rows: list[dict[str, Any]], suite: str, metric: str) -> dict[int, int]:
    """doc_id -> 0/1 for one suite's metric."""
    return {int(r["doc_id"]): int(round(r["metrics"][metric])) for r in rows
            if r.get("suite") == suite and metric in r.get("metrics", {})}


def observe(variant: Variant, values: list[int]) -> Observation:
    n, right = len(values), sum(values)
    return Observation(variant, right / n if n else None, None, wilson_interval(right, n), n)


def accuracy_check(suite: str, metric: str, tolerance: float, samples: dict[str, dict[int, int]],
                   affected: bool, why: str = "") -> CheckResult:
    """Base vs patched (regression) and patched vs reference (restored), paired on common samples."""
    common = sorted(set(samples[Variant.BASE]) & set(samples[Variant.PATCHED]) & set(samples[Variant.REFERENCE]))
    vec = {v: [samples[v][d] for d in common] for v in Variant}
    obs = {v: observe(v, vec[v]) for v in Variant}
    base, patched, reference = obs[Variant.BASE], obs[Variant.PATCHED], obs[Variant.REFERENCE]
    flags: list[CheckFlag] = []
    if not common:
        return CheckResult(suite, CheckKind.ACCURACY, metric, "no common samples", affected, base, patched,
                           reference, [CheckFlag.UNDERPOWERED], AccuracyPayload(tolerance, 0), [], why)
    base_vs_patched = compare_paired(vec[Variant.BASE], vec[Variant.PATCHED], tolerance)
    ref_vs_base = compare_paired(vec[Variant.REFERENCE], vec[Variant.BASE], tolerance)
    ref_vs_patched = compare_paired(vec[Variant.REFERENCE], vec[Variant.PATCHED], tolerance)
    base.passed = not ref_vs_base.regression
    patched.passed = not ref_vs_patched.regression
    reference.passed = True
    if base.passed and base_vs_patched.regression:
        flags.append(CheckFlag.REGRESSED)
    if not patched.passed:
        flags.append(CheckFlag.NOT_RESTORED)
    # A comparison with a significant difference (either way) is decided whatever its power; an
    # undecided one whose minimum detectable effect exceeds the tolerance cannot rule a drop out.
    undecided = [c for c in (base_vs_patched, ref_vs_patched) if c.p_value >= ALPHA]
    if any(c.underpowered for c in undecided):
        flags.append(CheckFlag.UNDERPOWERED)
    payload = AccuracyPayload(tolerance, len(common), base_vs_patched, ref_vs_patched, ref_vs_base)
    criterion = (f"{metric}: not significantly (McNemar p < 0.05) below the reference by more than {tolerance:g}; "
                 f"a significant drop of more than {tolerance:g} from base is a regression")
    return CheckResult(suite, CheckKind.ACCURACY, metric, criterion, affected, base, patched, reference, flags,
                       payload, [], why)
