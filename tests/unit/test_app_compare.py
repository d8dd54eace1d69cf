"""App comparators on small stored results, each with a case that must fail."""

import math
import random

import pytest

from infercheck.checks import app_compare as cmp
from infercheck.run.job import RequestResult


def res(rid, out, text="", logprobs=None, completions=None, finish="length", prompt_logprobs=None):
    return RequestResult(rid, "g", [1, 2], list(out), text, finish, logprobs, None, prompt_logprobs,
                         completions=completions)


def lp_rows(tokens, runner_up_gap=2.0):
    return [[[t, -0.01], [t + 1, -0.01 - runner_up_gap]] for t in tokens]


# ---- consistency -------------------------------------------------------------------------------

def test_consistency_equal_sets_pass():
    rs = [res("app/x#a/k1", [5, 6], logprobs=lp_rows([5, 6])), res("app/x#b/k1", [5, 6], logprobs=lp_rows([5, 6]))]
    c = cmp.compare_consistency(rs, "a", "b", 1e-3)
    assert c.passed and c.value == 0.0


def test_consistency_real_divergence_fails():
    rs = [res("app/x#a/k1", [5, 6], logprobs=lp_rows([5, 6])), res("app/x#b/k1", [5, 7], logprobs=lp_rows([5, 6]))]
    c = cmp.compare_consistency(rs, "a", "b", 1e-3)
    assert not c.passed and c.value == 1.0 and c.examples[0]["position"] == 1


def test_consistency_near_tie_flip_is_tolerated():
    rows = lp_rows([5, 6], runner_up_gap=1e-5)
    rs = [res("app/x#a/k1", [5, 6], logprobs=rows), res("app/x#b/k1", [5, 7], logprobs=rows)]
    assert cmp.compare_consistency(rs, "a", "b", 1e-3).passed


def test_consistency_missing_pair_fails():
    rs = [res("app/x#b/k1", [5], logprobs=lp_rows([5]))]
    assert not cmp.compare_consistency(rs, "a", "b", 1e-3).passed


# ---- seeded -----------------------------------------------------------------------------------

def test_seeded_same_tokens_pass_and_difference_fails():
    same = [res(f"app/s#{s}/p1", [4, 9, 9]) for s in ("alone", "batched", "repeat")]
    assert cmp.compare_seeded(same).passed
    diff = same[:2] + [res("app/s#repeat/p1", [4, 9, 8])]
    c = cmp.compare_seeded(diff)
    assert not c.passed and c.value == 1.0


def test_seeded_ignores_fillers_and_needs_repeats():
    assert not cmp.compare_seeded([res("app/s#filler/p1", [1]), res("app/s#alone/p2", [1])]).passed


# ---- sampler ------------------------------------------------------------------------------------

LOGPROBS = {4: math.log(0.5), 5: math.log(0.3), 6: math.log(0.15), 7: math.log(0.05)}


def test_sampling_distribution_order_and_masks():
    full = cmp.sampling_distribution(LOGPROBS, {"temperature": 1.0})
    assert full[4] == pytest.approx(0.5)
    top2 = cmp.sampling_distribution(LOGPROBS, {"temperature": 1.0, "top_k": 2})
    assert top2[4] == pytest.approx(0.5 / 0.8) and top2[6] == 0.0
    # min-p 0.4: keep p >= 0.2 -> tokens 4, 5
    minp = cmp.sampling_distribution(LOGPROBS, {"temperature": 1.0, "min_p": 0.4})
    assert minp[6] == 0.0 and minp[5] == pytest.approx(0.3 / 0.8)
    # top-p 0.7: ascending cumulative 0.05, 0.20 (<= 0.3 masked), 0.50 (> 0.3 kept)
    topp = cmp.sampling_distribution(LOGPROBS, {"temperature": 1.0, "top_p": 0.7})
    assert topp[7] == 0.0 and topp[6] == 0.0 and topp[5] == pytest.approx(0.375)
    cold = cmp.sampling_distribution(LOGPROBS, {"temperature": 0.5})
    assert cold[4] == pytest.approx(0.25 / (0.25 + 0.09 + 0.0225 + 0.0025))


def sampled(probs, n, seed):
    rng = random.Random(seed)
    tokens, weights = zip(*probs.items())
    return [{"ids": [t], "text": "", "finish_reason": "length"} for t in rng.choices(tokens, weights, k=n)]


def ref_row(rid):
    return res(rid, [4], logprobs=[[[t, lp] for t, lp in LOGPROBS.items()]])


def test_sampler_passes_on_exact_samples_and_fails_on_a_skewed_sampler():
    params = {"temperature": 1.0, "top_k": 3}
    exact = cmp.sampling_distribution(LOGPROBS, params)
    good = res("app/s#sample/c0", [4], completions=sampled({t: p for t, p in exact.items() if p}, 2000, 1))
    c = cmp.compare_sampler([good], {good.id: ref_row(good.id)}, {good.id: params}, 0.001, 5)
    assert c.passed, c.detail
    # a sampler that ignored top-k: token 7 appears although it is outside the support
    skew = res("app/s#sample/c0", [4], completions=sampled({4: 0.5, 5: 0.3, 6: 0.15, 7: 0.05}, 2000, 2))
    c = cmp.compare_sampler([skew], {skew.id: ref_row(skew.id)}, {skew.id: params}, 0.001, 5)
    assert not c.passed and c.detail["combinations"][0]["impossible_samples"] > 0
    assert "temperature=1.0, top_k=3:" in c.summary and "samples outside the 3 tokens" in c.summary


def test_sampler_chi_square_catches_a_shifted_distribution():
    params = {"temperature": 1.0}
    shifted = res("app/s#sample/c0", [4], completions=sampled({4: 0.6, 5: 0.25, 6: 0.1, 7: 0.05}, 2000, 3))
    c = cmp.compare_sampler([shifted], {shifted.id: ref_row(shifted.id)}, {shifted.id: params}, 0.001, 5)
    assert not c.passed and c.value < 1e-4 and "temperature=1.0: chi-square p" in c.summary


def test_chi_square_pools_rare_tokens():
    stat, p, dof = cmp.chi_square({1: 50, 2: 48, 3: 2}, {1: 0.5, 2: 0.49, 3: 0.01}, 5)
    assert dof == 1 and p > 0.05


# ---- logprobs -------------------------------------------------------------------------------------

def full_row(values):
    return [[t, v] for t, v in values.items()]


def test_logprobs_raw_and_processed_pass_and_swapped_modes_fail():
    ref_lp = {4: math.log(0.6), 5: math.log(0.3), 6: math.log(0.1)}
    processed = cmp.log_softmax_at(ref_lp, 0.7)
    raw_engine = res("app/l#raw/p", [4], logprobs=[full_row(ref_lp)], prompt_logprobs=[None, full_row(ref_lp)])
    proc_engine = res("app/l#processed/p", [4], logprobs=[full_row(processed)])
    refs = {r.id: res(r.id, [4], logprobs=[full_row(ref_lp)], prompt_logprobs=[None, full_row(ref_lp)])
            for r in (raw_engine, proc_engine)}
    assert cmp.compare_logprobs([raw_engine, proc_engine], refs, 0.7, 1e-3).passed
    # processed mode returning raw values (mode ignored) must fail
    wrong = res("app/l#processed/p", [4], logprobs=[full_row(ref_lp)])
    c = cmp.compare_logprobs([raw_engine, wrong], refs, 0.7, 1e-3)
    assert not c.passed and "processed sample logprobs" in c.detail["failed"]


# ---- structured ---------------------------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"sum": {"type": "integer", "minimum": 0, "maximum": 198}},
          "required": ["sum"], "additionalProperties": False}


def test_schema_errors():
    assert cmp.schema_errors({"sum": 12}, SCHEMA) == []
    assert cmp.schema_errors({"sum": 500}, SCHEMA)
    assert cmp.schema_errors({"sum": "12"}, SCHEMA)
    assert cmp.schema_errors({"total": 1}, SCHEMA)


def test_structured_valid_and_best_allowed_passes_invalid_or_off_step_fails():
    engine_rows = [[[4, -0.1], [5, -2.0], [6, -math.inf]]]
    ref_rows = [[[6, -0.05], [4, -0.2], [5, -3.0]]]  # 6 is best overall but not allowed; 4 best allowed
    ok = res("app/j#json/p", [4], text='{"sum": 4}', logprobs=engine_rows)
    refs = {ok.id: res(ok.id, [4], logprobs=ref_rows)}
    assert cmp.compare_structured([ok], refs, SCHEMA, 1e-3).passed
    off = res("app/j#json/p", [5], text='{"sum": 4}', logprobs=engine_rows)
    assert not cmp.compare_structured([off], refs, SCHEMA, 1e-3).passed
    invalid = res("app/j#json/p", [4], text='{"sum": 4', logprobs=engine_rows)
    c = cmp.compare_structured([invalid], refs, SCHEMA, 1e-3)
    assert not c.passed and c.detail["invalid"] == 1


# ---- stop and n ---------------------------------------------------------------------------------

def test_stop_cut_and_n():
    free = res("app/s#free/p", [1] * 10, text="102\n80+88=168\n")
    stop_ok = res("app/s#stop/p", [1] * 5, text="102\n80", finish="stop")
    n_ok = res("app/s#n/p", [1], completions=[{"ids": [1] * 24, "text": "1234", "finish_reason": "length"}] * 4)
    assert cmp.compare_stop([free, stop_ok, n_ok], ["+8", "=0"], 4, 24).passed
    # the stop string left in the output, and an n=4 request that returned 3 completions
    stop_bad = res("app/s#stop/p", [1] * 7, text="102\n80+8", finish="stop")
    n_bad = res("app/s#n/p", [1], completions=n_ok.completions[:3])
    c = cmp.compare_stop([free, stop_bad, n_bad], ["+8", "=0"], 4, 24)
    assert not c.passed and c.value == 2.0


def test_stop_absent_means_whole_output_and_length():
    free = res("app/s#free/p", [1] * 4, text="1234")
    same = res("app/s#stop/p", [1] * 4, text="1234", finish="length")
    n_ok = res("app/s#n/p", [1], completions=[{"ids": [1], "text": "1", "finish_reason": "stop"}] * 2)
    assert cmp.compare_stop([free, same, n_ok], ["+8"], 2, 4).passed


def test_included_stop_string_ends_the_output_with_it():
    free = res("app/s#free/p", [1] * 14, text="102\n80+88=168\n")
    stops = ["=16", "+88="]  # "+88=" completes first (end 10) though "=16" starts later
    assert cmp.cut_at_stop(free.text, stops, include=True) == ("102\n80+88=", True)
    assert cmp.cut_at_stop(free.text, stops) == ("102\n80", True)
    stop_ok = res("app/s#stop/p", [1] * 10, text="102\n80+88=", finish="stop")
    n_ok = res("app/s#n/p", [1], completions=[{"ids": [1] * 5, "text": "9+88=", "finish_reason": "stop"},
                                              {"ids": [1] * 24, "text": "1" * 24, "finish_reason": "length"}])
    assert cmp.compare_stop([free, stop_ok, n_ok], stops, 2, 24, include=True).passed
    # the split stop string never found: generation runs past it to max_tokens
    missed = res("app/s#stop/p", [1] * 14, text=free.text, finish="length")
    ran_on = res("app/s#n/p", [1], completions=[{"ids": [1] * 24, "text": "9+88=123\n" + "1" * 15,
                                                 "finish_reason": "length"}] * 2)
    c = cmp.compare_stop([free, missed, ran_on], stops, 2, 24, include=True)
    assert not c.passed and c.value == 2.0
    # the excluded-mode output is wrong in the included mode (the stop string must be kept)
    assert not cmp.compare_stop([free, res("app/s#stop/p", [1] * 6, text="102\n80", finish="stop"), n_ok],
                                stops, 2, 24, include=True).passed


# ---- reference ----------------------------------------------------------------------------------

def test_reference_comparator_fails_beyond_tolerance():
    profile = {"max_kl": 1e-4, "mean_kl": 1e-5, "max_abs_dlogprob": 1e-3, "min_top1": 1.0, "near_tie": 1e-3}
    engine = res("app/r#main/p", [4], logprobs=[[[4, math.log(0.9)], [5, math.log(0.1)]]])
    same = {engine.id: res(engine.id, [4], logprobs=[[[4, math.log(0.9)], [5, math.log(0.1)]]])}
    assert cmp.compare_reference([engine], same, profile).passed
    off = {engine.id: res(engine.id, [4], logprobs=[[[4, math.log(0.6)], [5, math.log(0.4)]]])}
    assert not cmp.compare_reference([engine], off, profile).passed
    assert not cmp.compare_reference([engine], {}, profile).passed
