"""The prefix-cache oracle's pure parts: the request sequences, the ideal cache and the comparator."""

from __future__ import annotations

import json
from pathlib import Path

from infercheck import prefix_grid
from infercheck.apps import app_sets, load_apps
from infercheck.models import zoo
from infercheck.checks.app_check import app_check
from infercheck.checks.prefix_cache import Served, compare_prefix_cache, ideal_cached_tokens, lost_reuse_sign
from infercheck.checks.signals import Runtime
from infercheck.run.job import RequestResult

# What the specification says each case finds cached, in blocks (docs/design.md, "Oracles"):
# the longest block-aligned prefix shared with an earlier request of the same salt, at most
# (prompt length - 1) // block size blocks.
EXPECTED_BLOCKS = {"first": 0, "identical": 4, "shared-1": 1, "shared-2": 2, "shared-3": 3, "shared-4": 4,
                   "whole-blocks": 3, "later-equal-depth-1": 0, "later-equal-depth-2": 0, "later-equal-depth-3": 0,
                   "gap-in-prefix": 1, "later-block-first": 0, "other-prefix": 1,
                   "equal-later-after-other-prefix": 2, "salted": 0, "salted-again": 4, "salted-prefix": 2, "other-salt": 0,
                   "partial-block": 2, "partial-of-cached-block": 2, "shorter-than-a-block": 0}


def served(sequence: list[prefix_grid.CacheRequest], out: int = 3) -> list[Served]:
    return [Served(r.key, list(r.prompt_ids), [1, 2, 3][:out], r.salt) for r in sequence]


def test_the_ideal_cache_gives_every_case_what_the_specification_says_at_each_block_size():
    for block in (32, 64):
        sequence = prefix_grid.sequence(block)
        got = dict(zip([r.key.split("-", 1)[1] for r in sequence], ideal_cached_tokens(served(sequence), block)))
        assert got == {k: v * block for k, v in EXPECTED_BLOCKS.items()}


def test_eviction_takes_partial_blocks_first_then_the_least_recently_used_tail_first():
    """Block size 2, a pool of 5 (4 usable). A = [1 2 3 4 5] computes 5 tokens + 1 output: blocks
    [12][34][5x]; B = [7 8 9 9 6] takes the partial block first, then A's tail, so A's head block
    survives; A again finds one block."""
    a, b = [1, 2, 3, 4, 5], [7, 8, 9, 9, 6]
    assert ideal_cached_tokens([Served("a", a, [0]), Served("b", b, [0]), Served("a2", a, [0])], 2, 5) == [0, 0, 2]
    assert ideal_cached_tokens([Served("a", a, [0]), Served("a2", a, [0])], 2, None) == [0, 4]
    # The decoded tokens' full blocks are cached too (all but the last output token are computed).
    assert ideal_cached_tokens([Served("a", [1, 2, 3], [4, 5, 6]), Served("b", [1, 2, 3, 4, 5, 9], [0])], 2) == [0, 4]


def result(set_name: str, key: str, prompt: list[int], cached: int, out: list[int], wave: int,
           salt: str | None = None) -> RequestResult:
    return RequestResult(f"oracle/prefix-cache#{set_name}/{key}", "g", prompt, out, "", "length",
                         [[[t, -0.1], [t + 1, -3.0]] for t in out], wave=wave, num_cached_tokens=cached,
                         cache_salt=salt)


def run(cached: list[int], twin_out: list[int] | None = None):
    sets = [prefix_grid.CacheSet("b2", 2)]
    prompts = [[1, 2, 3, 4, 5], [1, 2, 3, 4, 6], [1, 2, 7]]
    rows = [result("b2", f"r{i}", p, c, [9, 9], i) for i, (p, c) in enumerate(zip(prompts, cached))]
    rows += [result("uncached", f"b2-r{i}", p, 0, twin_out or [9, 9], 0) for i, p in enumerate(prompts)]
    return compare_prefix_cache(rows, sets, 1e-3)


def test_more_cached_tokens_than_the_ideal_fail_naming_request_and_block_fewer_are_lost_reuse():
    ideal = run([0, 4, 2])
    assert ideal.passed and ideal.detail["lost_reuse_tokens"] == 0
    false = run([0, 4, 4])
    assert not false.passed and false.detail["failing_cells"] == ["b2/r2"]
    assert "b2/r2: 4 cached tokens, ideal 2 (first wrong block: 1" in false.detail["false_sharing"][0]
    lost = run([0, 0, 2])
    assert lost.passed and lost.detail["lost_reuse"] == {"b2/r1": 4}
    assert "1 request(s)" in lost_reuse_sign(ideal, lost) and lost_reuse_sign(lost, lost) is None
    diverged = run([0, 4, 2], twin_out=[9, 8])
    assert not diverged.passed and diverged.detail["diverged"] == 3


def test_lost_reuse_on_patched_only_is_a_workaround_sign():
    app = load_apps()["prefix-cache"]
    sequence = prefix_grid.sequence(32)
    rows = {}
    for variant, lose in (("base", False), ("patched", True)):
        cached = ideal_cached_tokens(served(sequence, 2), 32)
        rows[variant] = [result("b32", r.key, list(r.prompt_ids), 0 if lose else c, [1, 2], i, r.salt)
                         for i, (r, c) in enumerate(zip(sequence, cached))]
        rows[variant] += [result("uncached", f"b32-{r.key}", list(r.prompt_ids), 0, [1, 2], 0) for r in sequence]
    app = type(app)(**{**app.__dict__, "compare": ("prefix-cache",),
                       "workload": {**app.workload, "block_sizes": [32], "eviction": None, "sliding_windows": []}})
    runtime = {v: Runtime(1000.0, None, 0, []) for v in ("base", "patched")}
    check = app_check(app, "", False, rows, {"base": {}, "patched": {}}, runtime, {},
                      {"near_tie": 1e-3}, {"min_base_hit_rate": 0.2, "hit_rate_drop": 0.5})
    assert check.flags == ["workaround"] and "less than the ideal cache on" in check.payload.workaround


def test_the_workload_sends_each_cached_request_alone_with_its_salt_and_an_uncached_twin():
    sets = {s.name: s for s in app_sets(load_apps()["prefix-cache"])}
    windows = ("w32", "w100", "w1000")
    cached = ("b32", "b64", "evict-b32", *(f"{w}-b{b}" for w in windows for b in (32, 64)))
    assert set(sets) == {*cached, "uncached", "uncached-tiny-llama-add", *(f"uncached-{w}" for w in windows)}
    for name in cached:
        waves = [r.wave for r in sets[name].requests]
        assert waves == sorted(set(waves)) and sets[name].engine_args["enable_prefix_caching"] is True
    for name in ("uncached", "uncached-tiny-llama-add", *(f"uncached-{w}" for w in windows)):
        assert sets[name].engine_args["enable_prefix_caching"] is False
    # The window sets and their twins run on the sliding-window model with the window edited.
    assert sets["b32"].model is None and sets["uncached"].model is None
    for w in windows:
        folder = sets[f"{w}-b32"].model
        assert folder == sets[f"{w}-b64"].model == sets[f"uncached-{w}"].model
        assert json.loads((Path(folder) / "config.json").read_text())["sliding_window"] == int(w[1:])
        twins = {r.id.rsplit("/", 1)[1] for r in sets[f"uncached-{w}"].requests}
        assert twins == {f"{w}-b{b}-{r.id.rsplit('/', 1)[1]}" for b in (32, 64) for r in sets[f"{w}-b{b}"].requests}
    assert sets["evict-b32"].engine_args["num_gpu_blocks_override"] == 12
    salted = [r for r in sets["b32"].requests if r.cache_salt]
    assert [r.id.rsplit("/", 1)[1].split("-", 1)[1] for r in salted] == ["salted", "salted-again", "salted-prefix",
                                                                         "other-salt"]
    twins = {r.id.rsplit("/", 1)[1] for r in sets["uncached"].requests}
    assert all(f"b32-{r.id.rsplit('/', 1)[1]}" in twins for r in sets["b32"].requests)
    # The small cache runs on the full-attention model, whatever the run's model, beside its own twins.
    evict_twins = {r.id.rsplit("/", 1)[1] for r in sets["uncached-tiny-llama-add"].requests}
    assert sets["evict-b32"].model == sets["uncached-tiny-llama-add"].model == str(zoo.model_dir("tiny-llama-add"))
    assert evict_twins == {f"evict-b32-{r.id.rsplit('/', 1)[1]}" for r in sets["evict-b32"].requests}


def test_on_a_sliding_window_set_the_ideal_is_an_upper_bound_fewer_is_not_lost_reuse():
    sets = [prefix_grid.CacheSet("w32-b2", 2, model="tiny-sliding", window=32)]
    prompts = [[1, 2, 3, 4, 5], [1, 2, 3, 4, 6], [1, 2, 7]]

    def rows(cached):
        out = [result("w32-b2", f"r{i}", p, c, [9, 9], i) for i, (p, c) in enumerate(zip(prompts, cached))]
        return out + [result("uncached-w32", f"w32-b2-r{i}", p, 0, [9, 9], 0) for i, p in enumerate(prompts)]

    fewer = compare_prefix_cache(rows([0, 2, 0]), sets, 1e-3)
    assert fewer.passed and fewer.detail["lost_reuse"] == {} and fewer.detail["below_bound"] == {"w32-b2/r1": 2,
                                                                                                   "w32-b2/r2": 2}
    assert lost_reuse_sign(compare_prefix_cache(rows([0, 4, 2]), sets, 1e-3), fewer) is None
    more = compare_prefix_cache(rows([0, 4, 4]), sets, 1e-3)  # more than the bound is still false sharing
    assert not more.passed and more.detail["failing_cells"] == ["w32-b2/r2"]
