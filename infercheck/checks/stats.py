"""Paired accuracy statistics over per-sample 0/1 vectors (numpy + scipy only, no engine imports).

See docs/design.md, "Measurements": McNemar exact test on discordant pairs, paired bootstrap CI of the
difference, Wilson CI per variant, minimum detectable effect at alpha=0.05, power 0.8.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import stats

from infercheck.payloads import PairedAccuracy

_BOOT_CHUNK_CELLS = 1_000_000  # resampled indices held in memory at once


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: b = right on A only, c = right on B only."""
    if b + c == 0:
        return 1.0
    return float(stats.binomtest(b, b + c, 0.5).pvalue)


def _z(q: float) -> float:
    return float(stats.norm.ppf(q))


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; (0, 1) when n == 0."""
    if n == 0:
        return (0.0, 1.0)
    z = _z(1 - (1 - confidence) / 2)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def paired_bootstrap_ci(a: Sequence[int], b: Sequence[int], n_boot: int = 10000,
                        confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of mean(b) - mean(a), resampling paired indices (deterministic per seed)."""
    if len(a) != len(b) or len(a) == 0:
        raise ValueError(f"paired bootstrap needs two equal, non-empty vectors (got {len(a)} and {len(b)})")
    d = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    n = d.size
    rng = np.random.default_rng(seed)
    chunk = max(1, _BOOT_CHUNK_CELLS // n)
    means = np.empty(n_boot)
    for start in range(0, n_boot, chunk):
        stop = min(n_boot, start + chunk)
        idx = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = d[idx].mean(axis=1)
    tail = (1 - confidence) / 2
    lo, hi = np.quantile(means, [tail, 1 - tail])
    return (float(lo), float(hi))


def minimum_detectable_effect(n: int, discordance: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest paired accuracy difference (fraction) a two-sided paired test on n pairs detects.

    Normal approximation for paired proportions (Connor 1987; McNemar sample size):
        n = (z_{1-alpha/2} * sqrt(psi) + z_{power} * sqrt(psi - delta^2))^2 / delta^2,
    i.e. delta = (z_{1-alpha/2} * sqrt(psi) + z_{power} * sqrt(psi - delta^2)) / sqrt(n),
    psi = discordant proportion. The left side minus the right side is increasing in delta on
    [0, psi], so delta is found by bisection there.

    psi is floored at 1/n: with psi = 0 the formula gives delta = 0, declaring a sample with no
    discordant pairs infinitely powerful. Beyond that, a true difference delta needs at least delta
    discordant pairs, so when no root lies in [0, psi] (small n or psi) the search continues with
    psi = delta (all discordant pairs one way), up to delta = 1. Returns math.inf when n == 0 or
    no difference up to 1 is detectable (n < z_{1-alpha/2}^2).
    """
    if n == 0:
        return math.inf
    z_a, z_b = _z(1 - alpha / 2), _z(power)
    floor = max(discordance, 1 / n)

    def excess(delta: float) -> float:
        psi = max(floor, delta)
        return delta * math.sqrt(n) - z_a * math.sqrt(psi) - z_b * math.sqrt(max(0.0, psi - delta * delta))

    if excess(1.0) < 0:
        return math.inf
    lo, hi = 0.0, 1.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if excess(mid) >= 0 else (mid, hi)
    return hi


def _as_binary(name: str, values: Sequence[int]) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1 or not np.isin(arr, (0, 1)).all():
        raise ValueError(f"{name} must be a flat vector of 0/1 per-sample scores")
    return arr.astype(int)


def compare_paired(a: Sequence[int], b: Sequence[int], tolerance: float, alpha: float = 0.05,
                   n_boot: int = 10000, seed: int = 0) -> PairedAccuracy:
    """Compare per-sample 0/1 vectors a (e.g. base) and b (e.g. patched) on the same samples."""
    if len(a) != len(b):
        raise ValueError(f"paired vectors differ in length: {len(a)} vs {len(b)}")
    if len(a) == 0:
        raise ValueError("paired vectors are empty")
    va, vb = _as_binary("a", a), _as_binary("b", b)
    n = int(va.size)
    only_a, only_b = int(np.sum((va == 1) & (vb == 0))), int(np.sum((va == 0) & (vb == 1)))
    acc_a, acc_b = float(va.mean()), float(vb.mean())
    diff = acc_b - acc_a
    p = mcnemar_exact(only_a, only_b)
    mde = minimum_detectable_effect(n, (only_a + only_b) / n, alpha)
    drop = p < alpha and diff < 0
    return PairedAccuracy(
        n=n, acc_a=acc_a, acc_b=acc_b, diff=diff,
        ci_a=wilson_interval(int(va.sum()), n), ci_b=wilson_interval(int(vb.sum()), n),
        diff_ci=paired_bootstrap_ci(va, vb, n_boot=n_boot, seed=seed),
        b_only_a=only_a, c_only_b=only_b, p_value=p, mde=mde, tolerance=tolerance,
        significant_drop=drop, regression=drop and -diff > tolerance,
        within_margin=abs(diff) <= tolerance + 1e-12, underpowered=mde > tolerance,
    )
