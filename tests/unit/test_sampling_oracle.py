"""The sampling oracle: grid expansion into rows and batch plans (pure), the comparators on synthetic
engine results against a synthetic processed reference, and the field classification against the
installed engine's SamplingParams."""

import math
import random

import pytest

from infercheck import oracle_grid
from infercheck.apps import ModelFacts, app_sets, load_apps
from infercheck.checks.sampling_oracle import (compare_distributions, compare_samples, compare_seeds,
                                               log_softmax)
from infercheck.errors import InfercheckError
from infercheck.run.job import RequestResult

VOCAB = 8
W = {"grid": {"temperature": [0.0, 0.5], "top_k": [1, "vocab-1"], "min_tokens": [{"min_tokens": 2, "stop_token_ids": [3]}]},
     "greedy": ["top_k"], "seeded": [{"seed": 5}], "n": {"n": 3}, "combos": {"count": 3, "seed": 1},
     "random_base": {"temperature": 1.0}, "plain_rows": 2}


def test_every_grid_value_becomes_a_row_with_the_random_base():
    rows = oracle_grid.oracle_rows(W, VOCAB, prompts=2)
    by_name = {r.name: r for r in rows}
    assert by_name["temperature.0"].params == {"temperature": 0.0}  # its own temperature wins
    assert by_name["top_k.1"].params == {"temperature": 1.0, "top_k": VOCAB - 1}
    assert by_name["min_tokens.0"].params == {"temperature": 1.0, "min_tokens": 2, "stop_token_ids": [3]}
    assert by_name["greedy.top_k.0"].params == {"temperature": 0.0, "top_k": 1}
    assert by_name["greedy.top_k.0"].field == "top_k" and by_name["seeded.0"].params["seed"] == 5
    assert by_name["n.0"].params["n"] == 3 and [r.name for r in rows if r.field == "none"] == ["none.0", "none.1"]
    combos = [r for r in rows if r.field == "combo"]
    assert len(combos) == 3 and "seed" in combos[2].params  # every third combination is seeded
    assert combos == [r for r in oracle_grid.oracle_rows(W, VOCAB, 2) if r.field == "combo"]  # deterministic
    assert {r.prompt for r in rows} == {0, 1}


def test_out_of_vocabulary_ids_and_unknown_plans_are_refused():
    with pytest.raises(InfercheckError, match="outside the model's vocabulary"):
        oracle_grid.oracle_rows({"grid": {"logit_bias": [{"99": 1.0}]}}, VOCAB, 1)
    with pytest.raises(InfercheckError, match="unknown batch plan"):
        oracle_grid.slots(oracle_grid.oracle_rows(W, VOCAB, 1), 1, ("raw_logprobs",), ("sideways",))


def test_batch_plans_put_each_row_alone_uniform_beside_its_field_and_mixed():
    rows = oracle_grid.oracle_rows(W, VOCAB, prompts=2)
    slots = oracle_grid.slots(rows, 2, ("raw_logits", "processed_logprobs"), oracle_grid.PLANS, ("top_k", "temperature"))
    keys = [(s.mode, s.key) for s in slots]
    assert len(keys) == len(set(keys))
    assert all(oracle_grid.parse_key(s.key) == (s.plan + (f".{s.batch}" if s.batch else ""), s.row.name, s.prompt)
               for s in slots)
    one_mode = [s for s in slots if s.mode == "raw_logits"]
    with_params = [r for r in rows if r.field != "none"]
    assert sum(s.plan == "alone" for s in one_mode) == len(with_params)
    assert sum(s.plan == "uniform" for s in one_mode) == 2 * len(with_params)
    top_k_batch = {s.row.name for s in one_mode if s.batch == "top_k"}
    assert top_k_batch == {"top_k.0", "top_k.1", "greedy.top_k.0", "none.0", "none.1"}
    mixed = [s.row.name for s in one_mode if s.plan == "mixed"]
    assert mixed == [r.name for r in rows] and [s.row.name for s in one_mode if s.plan == "reversed"] == mixed[::-1]
    staggered = [s for s in one_mode if s.plan == "staggered"]
    assert [s.row.name for s in staggered] == mixed and {s.max_tokens for s in staggered} == {2, 3, 4, 5, 6}
    assert all(s.max_tokens >= s.row.params.get("min_tokens", 0) for s in staggered)
    joining = [s for s in one_mode if s.plan == "joining"]
    assert len({s.wave for s in joining}) == 1 and len({s.key for s in joining}) == len(joining) == 3 * len(rows)
    assert [s.row.name for s in joining if not s.row.name.startswith(("none.l", "none.a"))] == mixed
    assert all(s.max_tokens == 0 for s in one_mode if s.plan not in ("staggered", "joining"))
    assert all(s.join_step == 0 for s in one_mode if s.plan != "joining")
    waves = [s.wave for s in one_mode]
    assert waves == sorted(waves) and len({s.wave for s in one_mode if s.plan == "mixed"}) == 1


def test_the_bundled_oracle_expands_on_a_model():
    (oracle,) = [a for a in load_apps().values() if a.check_name == "oracle/sampling"]
    sets = app_sets(oracle, ModelFacts(vocab_size=24))
    assert {s.name for s in sets} == set(oracle.workload["modes"])
    assert all(r.logprobs == -1 for s in sets for r in s.requests)


# ---- comparators on synthetic results -----------------------------------------------------------

def top_k(row, k):
    cut = sorted(row, reverse=True)[k - 1]
    return [v if v >= cut else -math.inf for v in row]


def reference(rid, steps, rng, k):
    raw = [[rng.gauss(0, 2) for _ in range(VOCAB)] for _ in range(steps)]
    return RequestResult(rid, "ref", [1], [], "", None, raw_logits=raw, processed_logits=[top_k(r, k) for r in raw],
                         borderline=[[] for _ in raw])


def engine(rid, ref, mode, tokens, corrupt=None):
    rows = [log_softmax(p) if mode == "processed_logprobs" else list(p) for p in ref.processed_logits]
    if corrupt:
        corrupt(rows)
    return RequestResult(rid, "g", [1], list(tokens), "", "length",
                         logprobs=[[[t, v] for t, v in enumerate(r)] for r in rows])


def draw(ref, rng):
    out = []
    for p in ref.processed_logits:
        probs = [math.exp(v) for v in log_softmax(p)]
        out.append(rng.choices(range(VOCAB), probs)[0])
    return out


def oracle_case(corrupt=None, sampler=draw, rows=12, seeded_tokens=None):
    """`rows` top_k=3 rows, each in two plans of one mode, plus one seeded row in two plans."""
    rng = random.Random(3)
    results, refs, params = [], {}, {}
    for i in range(rows):
        for plan in ("alone", "mixed"):
            rid = f"oracle/sampling#processed_logprobs/{plan}:top_k.{i}@p0"
            refs[rid] = ref = reference(rid, 6, random.Random(i), 3)
            params[rid] = {"temperature": 1.0, "top_k": 3}
            results.append(engine(rid, ref, "processed_logprobs", sampler(ref, rng), corrupt if plan == "mixed" else None))
    for plan, tokens in zip(("alone", "mixed"), seeded_tokens or ([4, 4, 4], [4, 4, 4])):
        rid = f"oracle/sampling#processed_logprobs/{plan}:seeded.0@p0"
        refs[rid] = ref = reference(rid, 3, random.Random(99), VOCAB)
        params[rid] = {"temperature": 1.0, "seed": 5}
        results.append(engine(rid, ref, "processed_logprobs", tokens))
    return results, refs, params


def test_distributions_pass_on_exact_values_and_name_the_parameter_that_fails():
    results, refs, params = oracle_case()
    assert compare_distributions(results, refs, params, 1e-3, 1e-4).passed

    def unmask(rows):  # the mixed batch forgets top_k: every token finite
        rows[0][:] = log_softmax([v if math.isfinite(v) else -5.0 for v in rows[0]])

    bad = compare_distributions(*oracle_case(unmask), 1e-3, 1e-4)
    assert not bad.passed and bad.detail["failing_parameters"] == ["top_k"]
    cell = next(c for c in bad.detail["table"] if c["failed"])
    assert (cell["parameter"], cell["plan"], cell["failed"], cell["results"]) == ("top_k", "mixed", 12, 12)
    assert "masked on one side only" in bad.examples[0]["failure"]

    def nudge(rows):
        finite = [t for t, v in enumerate(rows[1]) if math.isfinite(v)]
        rows[1][finite[0]] += 0.01

    assert not compare_distributions(*oracle_case(nudge), 1e-3, 1e-4).passed


def test_a_planned_request_without_a_result_fails():
    results, refs, params = oracle_case()
    out = compare_distributions(results[1:], refs, params, 1e-3, 1e-4)
    assert not out.passed and "without a reference" in out.summary


def test_samples_from_the_processed_distribution_pass_and_argmax_draws_fail():
    results, refs, params = oracle_case(rows=40)
    good = compare_samples(results, refs, params, 0.001, 1e-3)
    assert good.passed and good.detail["sampled"] >= 200 and good.detail["impossible"] == 0

    def argmax(ref, rng):
        return [max(range(VOCAB), key=lambda t: p[t]) for p in ref.processed_logits]

    greedy = compare_samples(*oracle_case(sampler=argmax, rows=40), 0.001, 1e-3)
    assert not greedy.passed and greedy.detail["pit_p_value"] < 0.001

    def masked(ref, rng):  # always a token top_k removed
        return [next(t for t in range(VOCAB) if not math.isfinite(p[t])) for p in ref.processed_logits]

    impossible = compare_samples(*oracle_case(sampler=masked), 0.001, 1e-3)
    assert not impossible.passed and impossible.detail["failing_parameters"] == ["top_k"]


def test_seeded_rows_must_repeat_across_plans():
    results, refs, params = oracle_case()
    assert compare_seeds(results, refs, params, 0.001).passed
    assert compare_seeds(*oracle_case(seeded_tokens=([4, 4, 4], [4, 4])), 0.001).passed  # a shorter run: its prefix
    out = compare_seeds(*oracle_case(seeded_tokens=([4, 4, 4], [4, 5, 4])), 0.001)
    assert not out.passed and out.detail["failing_parameters"] == ["seeded"]


# ---- the grid's field classification against the engine ----------------------------------------

def test_every_sampling_params_field_is_classified():
    structs = pytest.importorskip("msgspec.structs")
    vllm = pytest.importorskip("vllm")
    fields = {f.name for f in structs.fields(vllm.SamplingParams) if not f.name.startswith("_")}
    spec = load_apps()["sampling"].workload["fields"]
    classified = set(spec["covers"]) | set(spec["elsewhere"]) | set(spec["not_distribution"]) | set(spec["gaps"])
    assert fields - classified == set(), "SamplingParams fields the oracle has not classified"
    assert set(spec["covers"]) - fields == set(), "covered fields the engine does not have"
    grid = load_apps()["sampling"].workload["grid"]
    assert set(grid) <= set(spec["covers"])


def test_a_parameter_that_held_on_base_and_fails_on_patched_is_a_regression():
    from infercheck.checks.app_check import regressed_comparators
    from infercheck.payloads import Comparison

    def comparison(name, failing):
        return Comparison(name, not failing, float(len(failing)), "", {"failing_parameters": failing})

    base = [comparison("distributions", ["min_tokens"]), comparison("seeds", [])]
    assert regressed_comparators(base, [comparison("distributions", ["min_tokens"]), comparison("seeds", [])]) == []
    assert regressed_comparators(base, [comparison("distributions", []), comparison("seeds", [])]) == []
    assert regressed_comparators(base, [comparison("distributions", ["min_tokens", "top_k"]),
                                        comparison("seeds", ["seeded"])]) == ["seeds", "distributions[top_k]"]


def test_a_cell_that_held_on_base_is_judged_per_logprobs_mode():
    from infercheck.checks.app_check import regressed_comparators
    from infercheck.payloads import Comparison

    def comparison(cells):
        return Comparison("distributions", False, 1.0, "", {"failing_parameters": sorted({c.split("@")[0] for c in cells}),
                                                             "failing_cells": cells})

    base = [comparison(["top_k@raw_logits"])]  # the bug: raw_logits wrong; a fix that moves it to raw_logprobs
    assert regressed_comparators(base, [comparison(["top_k@raw_logprobs"])]) == ["distributions[top_k@raw_logprobs]"]
    assert regressed_comparators(base, [comparison(["top_k@raw_logits"])]) == []


def test_the_joining_plan_moves_every_row_and_fills_the_slots_it_vacated():
    rows = oracle_grid.oracle_rows(W, VOCAB, prompts=2)
    plan = oracle_grid.joining(rows, 2, max_tokens=6)
    cohorts: dict[int, list] = {}
    for row, length, step in plan:  # group by cohort start
        start = step - (oracle_grid.ARRIVAL_STEP if row.name.startswith("none.a") else 0)
        cohorts.setdefault(start, []).append((row, length, step))
    assert sum(len([r for r, _, _ in c if not r.name.startswith(("none.l", "none.a"))]) for c in cohorts.values()) == len(rows)
    starts = sorted(cohorts)
    for start, cohort in cohorts.items():
        leavers = [x for x in cohort if x[0].name.startswith("none.l")]
        arrivals = [x for x in cohort if x[0].name.startswith("none.a")]
        movers = [x for x in cohort if x not in leavers and x not in arrivals]
        assert len(leavers) == len(movers) == len(arrivals) <= oracle_grid.JOIN_COHORT
        assert cohort[:len(leavers)] == leavers  # the leavers take the lower slots
        assert all(length == oracle_grid.LEAVER_TOKENS and step == start for _, length, step in leavers)
        assert all(step == start and length > oracle_grid.ARRIVAL_STEP for _, length, step in movers)
        assert all(step == start + oracle_grid.ARRIVAL_STEP and not r.params for r, _, step in arrivals)
    assert all(b - a > oracle_grid.ARRIVAL_STEP + 6 for a, b in zip(starts, starts[1:]))  # cohorts never overlap
