"""Paired accuracy statistics against hand-computed values."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from infercheck.checks.stats import (
    compare_paired,
    mcnemar_exact,
    minimum_detectable_effect,
    paired_bootstrap_ci,
    wilson_interval,
)

Z95 = 1.959963984540054


# --- McNemar ---------------------------------------------------------------------------------

def test_mcnemar_all_discordant_one_way() -> None:
    # P(X = 51 or X = 0 | Bin(51, 1/2)) = 2 * 0.5**51
    assert mcnemar_exact(51, 0) == pytest.approx(2 * 0.5**51, rel=1e-12)
    assert mcnemar_exact(51, 0) == pytest.approx(8.881784197001252e-16, rel=1e-12)


def test_mcnemar_balanced_and_empty() -> None:
    assert mcnemar_exact(10, 10) == 1.0
    assert mcnemar_exact(0, 0) == 1.0


def test_mcnemar_8_2() -> None:
    # 2 * (C(10,0) + C(10,1) + C(10,2)) / 2**10 = 2 * 56 / 1024 = 0.109375
    hand = 2 * (math.comb(10, 0) + math.comb(10, 1) + math.comb(10, 2)) / 2**10
    assert hand == 0.109375
    assert mcnemar_exact(8, 2) == pytest.approx(hand, abs=1e-12)
    assert mcnemar_exact(2, 8) == pytest.approx(hand, abs=1e-12)


# --- Wilson ----------------------------------------------------------------------------------

def test_wilson_189_of_250() -> None:
    n, p, z = 250, 189 / 250, Z95
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    lo, hi = wilson_interval(189, 250)
    assert lo == pytest.approx(centre - half, abs=1e-9)
    assert hi == pytest.approx(centre + half, abs=1e-9)
    # by hand: centre 0.752126, half-width 0.052977
    assert (lo, hi) == (pytest.approx(0.699149, abs=1e-6), pytest.approx(0.805103, abs=1e-6))
    ci = stats.binomtest(189, 250).proportion_ci(0.95, method="wilson")
    assert (lo, hi) == (pytest.approx(ci.low, abs=1e-9), pytest.approx(ci.high, abs=1e-9))


def test_wilson_edges() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    lo, hi = wilson_interval(0, 20)
    assert lo == 0.0 and 0 < hi < 0.2
    lo, hi = wilson_interval(20, 20)
    assert hi == pytest.approx(1.0) and 0.8 < lo < 1.0


# --- paired bootstrap ------------------------------------------------------------------------

def test_bootstrap_degenerate_cases() -> None:
    v = [1, 0, 1, 1, 0] * 10
    assert paired_bootstrap_ci(v, v, n_boot=500) == (0.0, 0.0)
    assert paired_bootstrap_ci([0] * 30, [1] * 30, n_boot=500) == (1.0, 1.0)


def test_bootstrap_known_case_is_deterministic() -> None:
    a = [1, 0, 1, 1, 0, 1, 0, 1, 1, 1] * 20  # 70%
    b = [1, 1, 1, 0, 0, 1, 1, 1, 1, 1] * 20  # 80%; per block d = b - a has two +1, one -1
    ci = paired_bootstrap_ci(a, b, n_boot=2000, seed=0)
    assert ci == paired_bootstrap_ci(a, b, n_boot=2000, seed=0)
    assert ci[0] < 0.1 < ci[1]
    # normal approximation: var(d) = 0.3 - 0.1**2 = 0.29, se = sqrt(0.29/200) = 0.0381,
    # 0.1 +- 1.96 * 0.0381 = (0.025, 0.175)
    assert ci[0] == pytest.approx(0.025, abs=0.01)
    assert ci[1] == pytest.approx(0.175, abs=0.01)


def test_bootstrap_chunking_matches_single_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    import infercheck.checks.stats as mod

    a, b = [1, 0, 1, 1] * 25, [1, 1, 0, 1] * 25
    whole = paired_bootstrap_ci(a, b, n_boot=300, seed=3)
    monkeypatch.setattr(mod, "_BOOT_CHUNK_CELLS", 1000)  # 10 resamples per chunk
    assert paired_bootstrap_ci(a, b, n_boot=300, seed=3) == whole


def test_bootstrap_rejects_bad_lengths() -> None:
    with pytest.raises(ValueError):
        paired_bootstrap_ci([1, 0], [1])
    with pytest.raises(ValueError):
        paired_bootstrap_ci([], [])


# --- minimum detectable effect ---------------------------------------------------------------

def test_mde_hand_value_n500() -> None:
    # psi = 0.1, z_a = 1.959964, z_b = 0.841621, sqrt(500) = 22.36068, z_a*sqrt(psi) = 0.619795
    # d0 = (0.619795 + 0.841621*0.316228) / 22.36068 = 0.039620
    # d1 = (0.619795 + 0.841621*sqrt(0.1 - 0.039620**2)) / 22.36068 = (0.619795 + 0.264047) / 22.36068 = 0.039527
    # d2 = (0.619795 + 0.841621*sqrt(0.1 - 0.039527**2)) / 22.36068 = 0.039527  (fixed point)
    assert minimum_detectable_effect(500, 0.1) == pytest.approx(0.039527, abs=2e-6)


def test_mde_monotone_and_edges() -> None:
    assert minimum_detectable_effect(0, 0.1) == math.inf
    by_n = [minimum_detectable_effect(n, 0.1) for n in (100, 500, 1000, 5000)]
    assert by_n == sorted(by_n, reverse=True) and len(set(by_n)) == 4
    by_psi = [minimum_detectable_effect(500, psi) for psi in (0.1, 0.2, 0.3, 0.5)]
    assert by_psi == sorted(by_psi) and len(set(by_psi)) == 4


def test_mde_zero_discordance_is_finite_and_positive() -> None:
    # no root in [0, psi]: continue with psi = delta, i.e. solve 14.1421*u = 1.959964 + 0.841621*sqrt(1 - u^2),
    # u = sqrt(delta): u = 0.19694 -> delta = 0.03878
    assert minimum_detectable_effect(200, 0.0) == pytest.approx(0.03878, abs=1e-4)
    assert minimum_detectable_effect(3, 0.0) == math.inf  # sqrt(3) < z_a: nothing detectable


# --- compare_paired --------------------------------------------------------------------------

def _pairs(n: int, right_a: int, right_b: int) -> tuple[list[int], list[int]]:
    """b is right on a subset of a's right answers: every drop is a discordant pair."""
    return [1] * right_a + [0] * (n - right_a), [1] * right_b + [0] * (n - right_b)


def test_compare_clear_regression() -> None:
    a, b = _pairs(1000, 950, 700)  # 95% -> 70%, 250 discordant pairs, all one way
    r = compare_paired(a, b, tolerance=0.05, n_boot=1000)
    assert (r.b_only_a, r.c_only_b) == (250, 0)
    assert r.diff == pytest.approx(-0.25)
    assert r.p_value == pytest.approx(2 * 0.5**250, rel=1e-9)
    assert r.significant_drop and r.regression and not r.within_margin
    # psi = 0.25, sqrt(1000) = 31.6228: delta = (0.979982 + 0.841621*sqrt(0.25 - delta^2)) / 31.6228 = 0.04424
    assert r.mde == pytest.approx(0.04424, abs=1e-4)
    assert not r.underpowered
    assert r.diff_ci[0] < -0.25 < r.diff_ci[1]


def test_compare_regression_at_n200_is_detected_but_mde_above_5pct() -> None:
    a, b = _pairs(200, 190, 140)  # 95% -> 70%, 50 discordant pairs
    r = compare_paired(a, b, tolerance=0.05, n_boot=1000)
    assert r.significant_drop and r.regression
    # psi = 0.25, sqrt(200) = 14.1421: delta = (0.979982 + 0.841621*sqrt(0.25 - delta^2)) / 14.1421 = 0.09847
    assert r.mde == pytest.approx(0.09847, abs=1e-4)
    assert r.underpowered  # the drop was found, but a 5-point drop at this discordance might not be


def test_compare_no_change() -> None:
    a = [1, 1, 0, 1, 1, 1, 1, 1, 1, 1] * 20
    r = compare_paired(a, list(a), tolerance=0.05, n_boot=1000)
    assert r.p_value == 1.0 and r.diff == 0.0 and r.diff_ci == (0.0, 0.0)
    assert not r.significant_drop and not r.regression and r.within_margin and not r.underpowered
    assert r.ci_a == r.ci_b == wilson_interval(180, 200)


def test_compare_tiny_n_is_underpowered() -> None:
    a, b = _pairs(10, 10, 9)
    r = compare_paired(a, b, tolerance=0.05, n_boot=500)
    assert r.underpowered and not r.regression
    assert r.mde == pytest.approx(0.616, abs=1e-3)


def test_compare_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="length"):
        compare_paired([1, 0, 1], [1, 0], tolerance=0.05)
    with pytest.raises(ValueError, match="0/1"):
        compare_paired([1, 0, 2], [1, 0, 1], tolerance=0.05)
    with pytest.raises(ValueError, match="0/1"):
        compare_paired([1, 0, 1], [1, 0.5, 1], tolerance=0.05)
    with pytest.raises(ValueError, match="empty"):
        compare_paired([], [], tolerance=0.05)
