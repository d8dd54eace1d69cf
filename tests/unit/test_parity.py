import math

import pytest

from infercheck.checks.parity import (compare_greedy, lumped_kl, parity_stats, percentile, position_parity,
                                      summarize, teacher_forced, within_tolerance)
from infercheck.run.job import RequestResult

LN = math.log
PROFILE = {"max_kl": 1e-4, "mean_kl": 1e-5, "max_abs_dlogprob": 1e-3, "min_top1": 1.0, "near_tie": 1e-3}


def result(rid, out, logprobs=None, chosen=None):
    return RequestResult(rid, "g", [1, 5], out, "", "length", logprobs, chosen)


def test_lumped_kl_hand_computed():
    ref = {0: LN(0.5), 1: LN(0.3), 2: LN(0.2)}
    engine = {0: LN(0.4), 1: LN(0.4)}  # engine tail 0.2, reference tail (token 2) 0.2
    expected = 0.5 * LN(0.5 / 0.4) + 0.3 * LN(0.3 / 0.4) + 0.2 * LN(0.2 / 0.2)
    assert lumped_kl(ref, engine) == pytest.approx(expected, abs=1e-12)
    assert lumped_kl(ref, ref) == pytest.approx(0.0, abs=1e-12)


def test_near_tie_flip_is_not_a_failure():
    ref = [[7, LN(0.5002)], [9, LN(0.4998)]]  # gap 0.0008 nats
    engine = [[9, LN(0.5001)], [7, LN(0.4999)]]
    pos = position_parity(engine, ref, chosen=9, near_tie=1e-3)
    assert not pos.agree and pos.near_tie and pos.ref_best == 7
    far = position_parity([[9, LN(0.6)], [7, LN(0.4)]], [[7, LN(0.6)], [9, LN(0.4)]], chosen=9, near_tie=1e-3)
    assert not far.agree and not far.near_tie and far.ref_gap == pytest.approx(LN(1.5))


def test_teacher_forced_first_divergence_and_stats():
    good = [[3, LN(0.9)], [4, LN(0.1)]]
    flipped = [[4, LN(0.9)], [3, LN(0.1)]]
    engine = [result("a", [3, 4, 3], [good, flipped, good])]
    ref = {"a": result("a", [3, 4, 3], [good, good, good])}
    rows = teacher_forced(engine, ref, near_tie=1e-3)
    assert rows[0].first_divergence == 1
    stats = parity_stats(rows)
    assert stats.positions == 3 and stats.first_divergence == 1 and stats.diverged_requests == ["a"]
    assert stats.top1_agreement == pytest.approx(2 / 3)
    assert stats.max_abs_dlogprob == pytest.approx(abs(LN(0.9) - LN(0.1)))
    ok, reasons = within_tolerance(stats, PROFILE)
    assert not ok and any("top-1" in r for r in reasons) and any("max KL" in r for r in reasons)


def test_identical_runs_pass():
    pos = [[3, LN(0.7)], [4, LN(0.3)]]
    rows = teacher_forced([result("a", [3], [pos])], {"a": result("a", [3], [pos])}, 1e-3)
    ok, reasons = within_tolerance(parity_stats(rows), PROFILE)
    assert ok and reasons == []


def test_no_positions_fails():
    assert within_tolerance(parity_stats([]), PROFILE) == (False, ["no positions compared"])


def test_percentile_interpolates():
    assert percentile([0, 10], 50) == 5 and percentile(list(range(101)), 99) == 99 and percentile([], 99) == 0


def test_compare_greedy():
    a = result("x", [1, 2, 3], chosen=[-0.1, -0.2, -0.3])
    b = result("x", [1, 2, 4], chosen=[-0.1, -0.25, -0.3])
    row = compare_greedy([a], [b])[0]
    assert row.first_divergence == 2 and row.max_abs_dlogprob == pytest.approx(0.05)
    missing = summarize(compare_greedy([result("y", [1])], []))
    assert missing.first_divergences == {"y": 0} and not missing.all_equal


def test_nan_logprobs_never_pass():
    from infercheck.checks.app_compare import position_errors
    from infercheck.checks.parity import position_parity, worst

    nan = float("nan")
    pos = position_parity([[5, nan], [6, nan]], [[5, -0.1], [6, -2.5]], 5, 1e-3)
    assert pos.kl == math.inf and pos.abs_dlogprob == math.inf
    assert worst([0.1, nan, 0.2]) == math.inf and worst([nan]) == math.inf and worst([]) == 0.0
    err, n = position_errors([[[5, nan], [6, -2.0]]], [[[5, -0.1], [6, -2.5]]], 1.0)
    assert err == math.inf and n == 1
    masked, _ = position_errors([[[5, -0.1], [6, -math.inf]]], [[[5, -0.1], [6, -2.5]]], 1.0)
    assert masked < 0.1  # a masked (-inf) token is not an error
