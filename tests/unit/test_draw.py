"""Per-run prompt draws (infercheck/draw.py): other instances of the same distributions, the same
instances for the same seed, the bundled instances under seed 0 and for runs recorded before draws."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from infercheck import prefix_grid
from infercheck.apps import ModelFacts, app_sets, load_apps
from infercheck.checks.prefix_cache import Served, ideal_cached_tokens
from infercheck.checks.static_signals import static_evidence
from infercheck.draw import IDENTITY, SEED_VARIABLE, Draw, chosen_seed, parse_seed
from infercheck.errors import InfercheckError
from infercheck.options import ValidateOptions, load_options, save_options
from infercheck.paths import DATA_DIR
from infercheck.pipeline import with_seed
from infercheck.plan import make_plan, stage_tasks
from infercheck.prompts import build_prompts, source_texts
from infercheck.suites import select_suites

MANY_SHOT = {"set": "addition-many-shot", "count": 12, "min_chars": 400, "max_chars": 740, "offset": 200}
SEEDS = (Draw(17), Draw(20261205))


def test_a_draw_sends_other_prompts_of_the_same_shape_and_the_same_ones_again_for_its_seed():
    bundled = build_prompts(MANY_SHOT)
    assert build_prompts(MANY_SHOT, Draw(IDENTITY)) == bundled
    for draw in SEEDS:
        drawn = build_prompts(MANY_SHOT, draw)
        assert drawn == build_prompts(MANY_SHOT, Draw(draw.seed))
        assert [p.id for p in drawn] == [p.id for p in bundled]  # ids are the set's, not the instance's
        assert all(p.text != q.text for p, q in zip(drawn, bundled))
        for p, q in zip(drawn, bundled):  # the same length schedule: within one few-shot line of it
            assert abs(len(p.text) - len(q.text)) <= 20
            assert p.text.endswith("=") and p.answer is not None and p.text.count("\n") >= 30
    assert build_prompts(MANY_SHOT, SEEDS[0]) != build_prompts(MANY_SHOT, SEEDS[1])


def test_sets_the_suite_files_keep_apart_stay_apart_under_every_draw():
    """Every set is shifted by the same amount, so two sets at other offsets never share a question."""
    for draw in (Draw(IDENTITY), *SEEDS):
        a = build_prompts({"set": "addition-zero-shot", "count": 16, "offset": 200}, draw)
        b = build_prompts({"set": "addition-zero-shot", "count": 16, "offset": 300}, draw)
        assert not {p.text for p in a} & {p.text for p in b}


def test_literal_prompts_are_a_bug_reports_words_and_never_redrawn():
    spec = {"set": "literal", "prompts": ["12+34=", {"id": "x", "text": "07+45=", "answer": "052"}]}
    assert build_prompts(spec, SEEDS[0]) == build_prompts(spec)


@pytest.mark.parametrize("name", ["agent-multiturn", "sampler-distribution", "batch-invariance", "prefix-cache",
                                  "sampling", "seeded-determinism", "subagent-burst", "structured-output", "stop-and-n"])
def test_an_app_under_a_draw_keeps_its_requests_and_parameters_and_changes_their_prompts(name):
    app, model = load_apps()[name], ModelFacts(vocab_size=64)
    bundled = {r.id: r for s in app_sets(app, model) for r in s.requests}
    drawn = {r.id: r for s in app_sets(app, model, SEEDS[0]) for r in s.requests}
    again = {r.id: r for s in app_sets(app, model, Draw(SEEDS[0].seed)) for r in s.requests}
    assert drawn == again
    assert drawn.keys() == bundled.keys()
    assert all(drawn[k].sampling == bundled[k].sampling and drawn[k].wave == bundled[k].wave for k in drawn)
    content = lambda r: (r.prompt, r.prompt_token_ids, tuple(r.turns or ()))  # noqa: E731
    changed = [k for k in drawn if content(drawn[k]) != content(bundled[k])]
    assert len(changed) == len(drawn)


def test_the_prefix_cache_sequences_keep_their_structure_under_a_draw():
    """The ideal cache finds the same hits in every draw: the cases are block layouts, not token values."""
    for block in (32, 64):
        counts = []
        for draw in (Draw(IDENTITY), *SEEDS):
            seq = prefix_grid.cache_sets({"block_sizes": [block]}, draw)[0].requests()
            counts.append(ideal_cached_tokens([Served(r.key, list(r.prompt_ids), [1, 2, 3], r.salt) for r in seq], block))
        assert counts[0] == counts[1] == counts[2]
    assert prefix_grid.sequence(32) == prefix_grid.cache_sets({"block_sizes": [32]})[0].requests()


def test_lm_eval_data_is_staged_in_the_draws_order_and_keyed_by_what_was_staged(tmp_path):
    suites = select_suites("tiny-llama-add", ["accuracy/addition-zero-shot"])
    staged = {}
    for draw in (Draw(IDENTITY), *SEEDS):
        (task,) = stage_tasks(suites, tmp_path / str(draw.seed), draw)
        rows = (tmp_path / str(draw.seed) / "tasks" / "data" / "addition" / "test.jsonl").read_text().splitlines()
        staged[draw.seed] = (task.data_digest, rows)
    identity_rows = staged[IDENTITY][1]
    assert identity_rows == (DATA_DIR / "addition" / "test.jsonl").read_text().splitlines()
    for draw in SEEDS:
        digest, rows = staged[draw.seed]
        assert Counter(rows) == Counter(identity_rows) and rows[:300] != identity_rows[:300]
        assert digest != staged[IDENTITY][0]
        assert all(json.loads(r)["answer"] for r in rows[:5])
    assert staged[SEEDS[0].seed][0] != staged[SEEDS[1].seed][0]


def test_a_plan_carries_its_draw_to_every_workload():
    suites = select_suites("tiny-llama-add", ["parity/addition-short"])
    bundled, drawn = (make_plan("/m", "tiny-llama-add", "float32", suites, None, draw=d) for d in (Draw(), SEEDS[0]))
    assert drawn.draw == SEEDS[0]
    assert bundled.prompts().keys() == drawn.prompts().keys()
    assert all(bundled.prompts()[k].text != drawn.prompts()[k].text for k in drawn.prompts())


def test_the_seed_comes_from_the_option_then_the_environment_then_a_fresh_draw():
    assert chosen_seed(5, {SEED_VARIABLE: "9"}) == 5
    assert chosen_seed(None, {SEED_VARIABLE: " 9 "}) == 9
    fresh = {chosen_seed(None, {}) for _ in range(5)}
    assert IDENTITY not in fresh and len(fresh) > 1
    with pytest.raises(InfercheckError, match=SEED_VARIABLE):
        chosen_seed(None, {SEED_VARIABLE: "nine"})
    for bad in ("-1", "2147483648", "1.5"):
        with pytest.raises(ValueError):
            parse_seed(bad)


def test_a_run_records_its_seed_and_a_run_recorded_before_draws_reads_as_the_bundled_instances(tmp_path):
    patch = tmp_path / "fix.patch"
    patch.write_text("")
    opts = with_seed(ValidateOptions(patch=patch, command="infercheck validate fix.patch"))
    assert opts.seed is not None and opts.seed != IDENTITY and opts.command.endswith(f"--seed {opts.seed}")
    assert with_seed(opts) == opts  # a resumed run keeps its draw and its command
    save_options(opts, tmp_path / "run")
    assert load_options(tmp_path / "run").seed == opts.seed
    stored = json.loads((tmp_path / "run" / "inputs" / "options.json").read_text())
    del stored["seed"]
    (tmp_path / "run" / "inputs" / "options.json").write_text(json.dumps(stored))
    assert load_options(tmp_path / "run").seed == IDENTITY


def test_a_literal_from_another_draws_prompt_is_still_a_sent_prompt_literal():
    """A patch written against one run's prompts is judged under another draw: the static sign looks
    at what every draw's prompts are made of, not only at this run's."""
    other = build_prompts({"set": "addition-zero-shot", "count": 4, "offset": 0}, SEEDS[1])
    patch = ("--- a/vllm/x.py\n+++ b/vllm/x.py\n@@ -1,1 +1,2 @@\n x = 1\n"
             f"+    if prompt == {other[0].text!r}: return cached\n")
    this_run = [p.text for p in build_prompts(MANY_SHOT, SEEDS[0])]
    assert other[0].text not in "".join(this_run)
    signs = {e.sign for e in static_evidence(patch, [], None, [*this_run, *source_texts()])}
    assert "sent_prompt_literal" in signs
