"""Apps in the plan: engine groups of their own, pinned models, what the reference scores, and the
app check's flags on stored results."""

import math

import pytest

from infercheck.app_ids import parse_id, request_id
from infercheck.apps import ModelFacts, app_sets, load_apps
from infercheck.checks.app_check import app_check
from infercheck.checks.signals import Runtime, runtime_of
from infercheck.errors import InfercheckError
from infercheck.plan import engine_job, make_plan, reference_job
from infercheck.run.job import GroupResult, Job, RequestResult

PROFILE = {"max_kl": 1e-4, "mean_kl": 1e-5, "max_abs_dlogprob": 1e-3, "min_top1": 1.0, "near_tie": 1e-3}
SIGNALS = {"hit_rate_drop": 0.5, "min_base_hit_rate": 0.2, "throughput_floor": 0.3, "noise_factor": 3.0,
           "min_steps": 6, "alpha": 0.01}


def plan_with(*names):
    apps = load_apps()
    return make_plan("/models/main", "tiny-llama-add", "float32", [], None, apps=[apps[n] for n in names],
                     model_dir=lambda name: f"/models/{name}")


def test_every_bundled_app_loads_and_expands():
    for app in load_apps().values():
        sets = app_sets(app, ModelFacts(vocab_size=24))
        ids = [r.id for s in sets for r in s.requests]
        assert ids and len(ids) == len(set(ids)), app.name
        assert all(parse_id(i)[0] == app.name for i in ids)


def test_request_ids_round_trip():
    assert parse_id(request_id("app/agent-multiturn", "session", "s0") + ".t03") == ("agent-multiturn", "session", "s0.t03")
    assert parse_id(request_id("oracle/sampling", "processed_logprobs", "field.top_k:top_k.0@p1")) == \
        ("sampling", "processed_logprobs", "field.top_k:top_k.0@p1")
    assert parse_id("parity/addition-long#m1") is None


def test_a_vocabulary_sized_grid_value_needs_the_model():
    with pytest.raises(InfercheckError, match="vocabulary size"):
        app_sets(load_apps()["sampling"])


def test_apps_get_engine_groups_of_their_own_with_pinned_models():
    job = engine_job(plan_with("preemption", "sliding-window", "subagent-burst"))
    names = {g.name: g for g in job.groups}
    assert {"app:preemption:tight", "app:preemption:roomy"} <= set(names)
    assert names["app:preemption:tight"].engine_args["num_gpu_blocks_override"] == 12
    assert names["app:sliding-window:main"].model == "/models/tiny-sliding"
    burst = names["app:subagent-burst:burst"]  # the lead (wave 0), then the burst, on one engine
    assert sorted({r.wave for r in burst.requests}) == [0, 1] and len(burst.requests) == 17
    solo = names["app:subagent-burst:solo"]  # one at a time on an engine without prefix caching
    assert solo.engine_args["enable_prefix_caching"] is False and len({r.wave for r in solo.requests}) == 16
    assert Job.from_dict(__import__("json").loads(job.to_json())).groups[2].model == job.groups[2].model


def test_session_requests_carry_turns():
    (session,) = app_sets(load_apps()["agent-multiturn"])
    assert len(session.requests) == 2 and len(session.requests[0].turns) == 24
    assert session.requests[0].turns[0].endswith("=") and "\n" in session.requests[0].turns[1]


def res(rid, out, logprobs=None, completions=None):
    return RequestResult(rid, "g", [1, 2], list(out), "", "length", logprobs, None, completions=completions)


def test_reference_job_scores_what_the_comparators_need():
    plan = plan_with("sliding-window", "sampler-distribution", "seeded-determinism")
    pos = [[5, -0.1], [6, -2.0]]
    results = [res("app/sliding-window#main/m1", [5], [pos]),
               res("app/sampler-distribution#sample/c0", [7], completions=[{"ids": [7]}] * 3),
               res("app/seeded-determinism#alone/m1", [5])]
    job, id_map = reference_job(plan, results)
    by_model = {g.model: g for g in job.groups}
    assert set(by_model) == {"/models/tiny-sliding", "/models/main"}
    assert by_model["/models/tiny-sliding"].requests[0].candidate_ids == [[5, 6]]
    assert by_model["/models/main"].requests[0].logprobs == -1  # full distribution for the sampler
    assert "app/seeded-determinism#alone/m1" not in id_map  # no reference needed


def test_unknown_app_and_bad_yaml_are_refused(tmp_path):
    from infercheck.apps import select_apps

    with pytest.raises(InfercheckError, match="unknown app"):
        select_apps(["nope"])
    (tmp_path / "apps").mkdir()
    (tmp_path / "apps" / "x.yaml").write_text("name: x\ncompare: [vibes]\nworkload: {type: prompts}\n")
    with pytest.raises(InfercheckError, match="unknown comparator"):
        load_apps(tmp_path)


def burst_results(solo_token):
    rows = [[[5, -0.01], [6, -3.0], [7, -4.0]]]
    return [res("app/subagent-burst#burst/q00", [5], rows), res("app/subagent-burst#solo/q00", [solo_token], rows)]


def test_app_check_collateral_and_workaround_flags():
    app = load_apps()["subagent-burst"]
    app = type(app)(**{**app.__dict__, "compare": ("consistency",)})
    engine = {"base": burst_results(5), "patched": burst_results(7)}
    runtime = {"base": Runtime(1000.0, 0.8, 0, []), "patched": Runtime(1000.0, 0.0, 0, [])}
    check = app_check(app, "touches x", False, engine, {"base": {}, "patched": {}}, runtime, {}, PROFILE, SIGNALS)
    assert check.base.passed and not check.patched.passed
    assert check.flags == ["regressed", "not_restored", "workaround"]
    assert "hit rate collapsed" in check.workaround_reason() and check.why == "touches x"
    assert check.examples and check.examples[0]["variant"] == "patched"
    same = app_check(app, "", False, {"base": burst_results(5), "patched": burst_results(5)},
                     {"base": {}, "patched": {}}, {"base": runtime["base"], "patched": runtime["base"]}, {},
                     PROFILE, SIGNALS)
    assert same.flags == [] and same.patched.detail.runtime.hit_rate == 0.8
    assert math.isclose(same.patched.value, 0.0)


def test_app_groups_are_isolated_and_the_flag_survives_the_job_file():
    job = engine_job(plan_with("preemption"))
    assert all(g.isolated for g in job.groups if g.name.startswith("app:"))
    again = Job.from_dict(__import__("json").loads(job.to_json()))
    assert [g.isolated for g in again.groups] == [g.isolated for g in job.groups]


def test_an_app_whose_patched_engine_raises_regresses_a_refused_allocation_is_an_error_and_base_judges_nothing():
    """The patched engine raising on requests base served (an IndexError in a sampler op, a config
    it now refuses) is the patch breaking the app: COLLATERAL with the exception as evidence. A
    refused allocation says nothing about the patch (ERROR:run); a base failure judges nothing."""
    from infercheck.verdict import check_flags, decide

    app = load_apps()["subagent-burst"]
    app = type(app)(**{**app.__dict__, "compare": ("consistency",)})
    engine = {"base": burst_results(5), "patched": burst_results(5)[:1]}
    ok = Runtime(1000.0, 0.8, 0, [])
    raised = runtime_of([GroupResult("app:subagent-burst:burst", {}, 3, 0, 0, 0.0, 0.0,
                                     error="RuntimeError: index 64 is out of bounds", error_kind="exception")])
    refused = runtime_of([GroupResult("app:subagent-burst:burst", {}, 3, 0, 0, 0.0, 0.0,
                                      error="MemoryError: refused", error_kind="memory")])
    assert raised.engine_raised and not refused.engine_raised
    check = app_check(app, "", False, engine, {"base": {}, "patched": {}}, {"base": ok, "patched": raised}, {},
                      PROFILE, SIGNALS)
    assert check.flags == ["regressed", "not_restored"] and check.base.passed and check.patched.passed is False
    assert check.regressed_parts() == ["serves"] and "out of bounds" in check.payload.note
    (flag,) = [f for f in check_flags(check, has_symptom=True) if f.code == "COLLATERAL"]
    assert "serves passed on base" in flag.message
    assert decide([check], [], has_symptom=True).headline == "COLLATERAL"
    memory = app_check(app, "", False, engine, {"base": {}, "patched": {}}, {"base": ok, "patched": refused}, {},
                       PROFILE, SIGNALS)
    assert memory.flags == ["error"] and "refused" in memory.patched.error
    assert decide([memory], [], has_symptom=True).headline == "ERROR:run"
    both = app_check(app, "", False, engine, {"base": {}, "patched": {}}, {"base": raised, "patched": raised}, {},
                     PROFILE, SIGNALS)
    assert both.flags == [] and both.base.passed is None and "cannot judge" in both.payload.note


def test_a_comparator_that_held_on_base_regresses_even_when_another_fails_on_both():
    """Burst-vs-solo consistency breaks on patched while the reference comparison fails on both
    (the bug's own damage): still collateral, and named."""
    from infercheck.verdict import check_flags

    app = load_apps()["subagent-burst"]
    refs = {"app/subagent-burst#burst/q00": res("r", [9], [[[9, -0.01]]]),
            "app/subagent-burst#solo/q00": res("r", [9], [[[9, -0.01]]])}
    runtime = {v: Runtime(1000.0, 0.8, 0, []) for v in ("base", "patched")}
    check = app_check(app, "", False, {"base": burst_results(5), "patched": burst_results(7)},
                      {"base": refs, "patched": refs}, runtime, {}, PROFILE, SIGNALS)
    assert not check.base.passed and not check.patched.passed  # the reference fails on both
    assert check.flags[0] == "regressed" and check.regressed_parts() == ["consistency"]
    (flag,) = [f for f in check_flags(check, has_symptom=True) if f.code == "COLLATERAL"]
    assert "consistency passed on base" in flag.message
    both_bad = app_check(app, "", False, {"base": burst_results(7), "patched": burst_results(7)},
                         {"base": refs, "patched": refs}, runtime, {}, PROFILE, SIGNALS)
    assert "regressed" not in both_bad.flags and not both_bad.regressed_parts()
