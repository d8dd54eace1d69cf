"""Suites, symptom specs, cases and plans (data only), and the check builders on stored results."""

from pathlib import Path

import pytest
import yaml

from infercheck.cases import load_case
from infercheck.checks.accuracy import accuracy_check, per_sample
from infercheck.checks.symptom import symptom_check
from infercheck.errors import InfercheckError
from infercheck.paths import PATCHES_DIR
from infercheck.plan import engine_job, make_plan, reference_eval_job, reference_job
from infercheck.prompts import Prompt, build_prompts
from infercheck.run.job import RequestResult
from infercheck.suites import load_symptom, select_suites


def test_default_suites_skip_standard_hub_tasks():
    names = [s.name for s in select_suites("tiny-llama-add", None)]
    assert "parity/addition-long" in names and "accuracy/addition-zero-shot" in names
    assert "accuracy/gsm8k" not in names


def test_suite_selection_by_kind_and_name():
    assert {s.kind for s in select_suites("tiny-llama-add", ["parity"])} == {"parity"}
    assert [s.name for s in select_suites("x", ["addition-choice"])] == ["accuracy/addition-choice"]
    with pytest.raises(InfercheckError, match="unknown suite 'nope'"):
        select_suites("x", ["nope"])


@pytest.mark.parametrize("spec,message", [
    ({"description": "x", "criterion": {"type": "vibes"}, "prompts": {"set": "literal"}}, "criterion.type"),
    ({"criterion": {"type": "accuracy"}, "prompts": {"set": "literal"}}, "needs `min`"),
    ({"criterion": {"type": "parity"}}, "needs `prompts`"),
])
def test_bad_symptom_specs(tmp_path, spec, message):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(InfercheckError, match=message):
        load_symptom(path)


def test_prompt_sets_are_deterministic_and_sized():
    spec = {"set": "addition-many-shot", "count": 5, "min_chars": 300, "max_chars": 450}
    prompts = build_prompts(spec)
    assert prompts == build_prompts(spec)
    assert 300 <= len(prompts[0].text) <= 310 and 440 <= len(prompts[-1].text) <= 460
    assert all(p.answer and len(p.answer) == 3 for p in prompts)
    with pytest.raises(InfercheckError, match="unknown prompt set"):
        build_prompts({"set": "mystery"})


def test_plan_groups_by_engine_args_and_stages_tasks(tmp_path):
    suites = select_suites("tiny-llama-add", ["parity", "addition-zero-shot"])
    plan = make_plan("/m", "tiny-llama-add", "float32", suites, None, tmp_path / "inputs")
    plan.workloads[0].engine_args = {"enable_prefix_caching": False}
    job = engine_job(plan)
    assert len(job.groups) == 2 and sum(len(g.requests) for g in job.groups) == 28
    assert [t.label for g in job.groups for t in g.lm_eval] == ["accuracy/addition-zero-shot"]
    staged = yaml.safe_load((tmp_path / "inputs" / "tasks" / "addition_sums.yaml").read_text())
    test_file = Path(staged["dataset_kwargs"]["data_files"]["test"])
    assert not test_file.is_absolute() and (tmp_path / "inputs" / "tasks" / test_file).is_file()
    assert reference_eval_job(plan).groups[0].lm_eval[0].name == "addition_sums"


def result(rid, out, text="", logprobs=None):
    return RequestResult(rid, "g", [1, 2], out, text, "length", logprobs, [-0.1] * len(out))


def test_reference_job_dedupes_identical_continuations(tmp_path):
    plan = make_plan("/m", "tiny-llama-add", "float32", select_suites("x", ["addition-short"]), None, tmp_path)
    pos = [[5, -0.1], [6, -2.0]]
    job, id_map = reference_job(plan, [result("s#a", [5], logprobs=[pos]), result("s#b", [5], logprobs=[pos]),
                                       result("s#c", [6], logprobs=[pos])])
    requests = {r.id: r for r in job.groups[0].requests}
    assert len(requests) == 2 and id_map["s#a"] == id_map["s#b"] != id_map["s#c"]
    assert requests[id_map["s#a"]].continuation_ids == [5] and requests[id_map["s#a"]].candidate_ids == [[5, 6]]
    again, _ = reference_job(plan, [result("s#c", [6], logprobs=[pos]), result("s#a", [5], logprobs=[pos])])
    assert again.to_json() == job.to_json()  # content-derived ids: the cache key ignores result order


def rows(suite, values):
    return [{"suite": suite, "doc_id": i, "metrics": {"exact_match": v}} for i, v in enumerate(values)]


def test_accuracy_check_flags_a_significant_regression():
    n = 300
    base, ref = [1] * n, [1] * n
    patched = [0] * 60 + [1] * (n - 60)
    samples = {v: per_sample(rows("a", vals), "a", "exact_match")
               for v, vals in (("base", base), ("patched", patched), ("reference", ref))}
    check = accuracy_check("a", "exact_match", 0.05, samples, affected=False)
    assert check.base.passed and not check.patched.passed
    assert check.flags == ["regressed", "not_restored"]
    assert check.patched.value == pytest.approx(0.8) and check.patched.ci[0] < 0.8 < check.patched.ci[1]
    assert check.payload.base_vs_patched.p_value < 1e-10


def test_accuracy_check_equal_runs_have_no_flags():
    vals = [1, 0] * 200
    samples = {v: per_sample(rows("a", vals), "a", "exact_match") for v in ("base", "patched", "reference")}
    check = accuracy_check("a", "exact_match", 0.05, samples, affected=True)
    assert check.flags == [] and check.patched.passed


def test_accuracy_check_tiny_sample_is_underpowered():
    vals = [1, 1, 1, 0, 1]
    samples = {v: per_sample(rows("a", vals), "a", "exact_match") for v in ("base", "patched", "reference")}
    assert accuracy_check("a", "exact_match", 0.05, samples, affected=True).flags == ["underpowered"]


def test_symptom_accuracy_fail_to_pass(tmp_path):
    spec_path = tmp_path / "s.yaml"
    spec_path.write_text(yaml.safe_dump({"description": "long prompts", "criterion": {"type": "accuracy", "min": 0.9},
                                         "prompts": {"set": "literal", "prompts": ["1+1="]}}))
    spec = load_symptom(spec_path)
    prompts = {f"symptom#{i}": Prompt(str(i), "q=", "042") for i in range(10)}
    base = [result(k, [1], "041\n") for k in prompts]
    patched = [result(k, [1], "042\n17+") for k in prompts]
    check = symptom_check(spec, {"base": base, "patched": patched}, {}, prompts, {})
    assert (check.base.value, check.patched.value) == (0.0, 1.0) and check.flags == []
    unfixed = symptom_check(spec, {"base": base, "patched": base}, {}, prompts, {})
    assert unfixed.flags == ["symptom_fails"]
    not_reproduced = symptom_check(spec, {"base": patched, "patched": patched}, {}, prompts, {})
    assert not_reproduced.flags == ["not_reproduced"]


@pytest.mark.parametrize("case_id", ["rotary-half-precision-cache", "sliding-window-off-by-one"])
def test_bundled_cases_load(case_id):
    case = load_case(PATCHES_DIR / case_id)
    assert case.base_patches and case.symptom and len(case.candidates) >= 2
    assert case.candidate_for(case.candidates[0].patch).expected == "RESOLVED"
    assert load_symptom(case.symptom).affected


def test_case_folder_must_have_case_yaml(tmp_path):
    with pytest.raises(InfercheckError, match="no case.yaml"):
        load_case(tmp_path)


def test_demo_case_exists_and_its_first_candidate_is_the_root_fix():
    from infercheck.commands import DEMO_CASE

    case = load_case(DEMO_CASE)
    assert case.candidates[0].expected == "RESOLVED" and case.candidates[0].patch.is_file()


def test_app_symptom_loads_and_puts_its_app_first(tmp_path):
    from infercheck.neighbours import choose_apps

    path = tmp_path / "symptom.yaml"
    path.write_text(yaml.safe_dump({"description": "top-k sampling is biased", "criterion": {"type": "app",
                                                                                             "app": "sampler-distribution"}}))
    spec = load_symptom(path)
    assert spec.kind == "app" and spec.app == "sampler-distribution" and not spec.prompts
    apps, why = choose_apps(["vllm/v1/sample/sampler.py"], None, spec.app)
    assert apps[0].name == "sampler-distribution" and len({a.name for a in apps}) == len(apps)
    assert "reported symptom" in why["sampler-distribution"]
    plan = make_plan("/m", "tiny-llama-add", "float32", [], spec, apps=apps, model_dir=lambda n: f"/{n}")
    assert not [w for w in plan.workloads if w.name == "symptom"]  # its requests are the app's own
    path.write_text(yaml.safe_dump({"criterion": {"type": "app", "app": "no-such-app"}}))
    with pytest.raises(InfercheckError, match="an app criterion needs `app`"):
        load_symptom(path)


def test_app_symptom_check_reads_the_app_check():
    from infercheck.records import CheckResult, Observation
    from infercheck.checks.symptom import app_symptom_check
    from infercheck.specs import SymptomSpec

    spec = SymptomSpec("biased top-k", "app", app="sampler-distribution", path="s.yaml")

    def app(base, patched):
        return CheckResult("app/sampler-distribution", "app", "failed comparators", "sampler", True, base, patched,
                           None, [], None, [], "")
    ok, bad = Observation("x", 0.0, True), Observation("x", 1.0, False)
    crashed = Observation("x", None, None, error="RuntimeError: boom")
    assert app_symptom_check(spec, app(bad, ok)).flags == []
    assert app_symptom_check(spec, app(bad, bad)).flags == ["symptom_fails"]
    assert app_symptom_check(spec, app(ok, ok)).flags == ["not_reproduced"]
    assert app_symptom_check(spec, app(crashed, ok)).flags == []  # a crash on base is the symptom reproducing
    assert app_symptom_check(spec, app(bad, crashed)).flags == ["error"]
    assert app_symptom_check(spec, app(crashed, crashed)).flags == ["symptom_fails"]


def test_the_reference_scores_the_prompt_the_harness_sent_not_the_one_the_engine_reports(tmp_path):
    """An engine that alters its prompt (here: reports other ids for it) is scored on what was sent:
    the prompt's text (the reference tokenizes it) or its ids; a session's turns keep the engine's
    context (its own answers are part of it)."""
    from infercheck.apps import load_apps

    suites = select_suites("x", ["addition-short"])
    plan = make_plan("/m", "tiny-llama-add", "float32", suites, None, tmp_path, apps=[load_apps()["agent-multiturn"],
                                                                                     load_apps()["prefix-cache"]])
    sent = {r.id: r for g in engine_job(plan).groups for r in g.requests}
    text_id = next(i for i in sent if i.startswith("parity/addition-short#"))
    ids_id = next(i for i, r in sent.items() if r.prompt_token_ids is not None)
    session_id = next(i for i, r in sent.items() if r.turns) + ".t01"
    altered = [RequestResult(rid, "g", [9, 9, 9], [output], "", "length", [[[output, -0.1]]], [-0.1])
               for rid, output in ((text_id, 5), (ids_id, 5), (session_id, 6))]
    job, id_map = reference_job(plan, altered)
    scored = {r.id: r for g in job.groups for r in g.requests}
    text, ids, session = (scored[id_map[rid]] for rid in (text_id, ids_id, session_id))
    assert (text.prompt, text.prompt_token_ids) == (sent[text_id].prompt, None)
    assert (ids.prompt, ids.prompt_token_ids) == (None, sent[ids_id].prompt_token_ids)
    assert (session.prompt, session.prompt_token_ids) == (None, [9, 9, 9])
