"""The position oracle's pure parts: config variants, buckets, the plan's per-variant models and the
comparator over recorded rows."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from infercheck import position_grid
from infercheck.apps import app_sets, load_apps
from infercheck.checks.app_check import app_check, regressed_comparators
from infercheck.checks.positions import BucketTolerance, compare_positions, row_error
from infercheck.errors import InfercheckError
from infercheck.models import zoo
from infercheck.models.config_variants import ConfigVariant, variant_folder
from infercheck.plan import engine_job, make_plan, reference_job
from infercheck.run.job import RequestResult

ORACLE = load_apps()["positions"]


def test_a_variant_folder_is_the_base_with_an_edited_config_built_once_and_named_by_its_content(tmp_path):
    base = zoo.model_dir("tiny-llama-add")
    variant = ConfigVariant("yarn", "tiny-llama-add", {"rope_parameters": {"rope_type": "yarn", "factor": 4.0},
                                                       "pretraining_tp": None})
    folder = variant_folder(variant, base, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    assert config["rope_parameters"] == {"rope_type": "yarn", "factor": 4.0} and "pretraining_tp" not in config
    assert config["hidden_size"] == json.loads((base / "config.json").read_text())["hidden_size"]
    assert (folder / "model.safetensors").read_bytes() == (base / "model.safetensors").read_bytes()
    assert not (folder / "manifest.json").exists()  # the base's build record is not the variant's
    assert variant_folder(variant, base, tmp_path) == folder  # built once
    other = variant_folder(ConfigVariant("yarn", "tiny-llama-add", {"sliding_window": 64}), base, tmp_path)
    assert other != folder and sorted(p.name for p in tmp_path.iterdir()) == sorted([folder.name, other.name])


def test_buckets_are_upper_bounds_and_bad_ones_are_refused():
    bounds = position_grid.buckets({})
    assert bounds == (256, 2048, 4096, 8192)
    assert [position_grid.bucket_of(p, bounds) for p in (0, 255, 256, 2047, 4096, 8191, 8192)] == \
        [256, 256, 2048, 2048, 8192, 8192, None]
    with pytest.raises(InfercheckError):
        position_grid.buckets({"buckets": [2048, 256]})
    with pytest.raises(InfercheckError):
        position_grid.variants({"variants": {"x": {"model": "no-such-model"}}})


def test_every_variant_gets_its_own_engine_on_its_own_model_and_a_prompt_that_reaches_the_last_bucket():
    sets = app_sets(ORACLE)
    custom = [s for s in sets if "~" not in s.name]
    assert len(custom) >= 10 and len({s.model for s in custom}) == len(custom)
    # Every rope variant also under the PyTorch forward_native dispatch, on the same model folder
    # (the window variants' CustomOps are theta-1e4's: they run once).
    native = {s.name: s for s in sets if s.name.endswith("~native")}
    rope = [s for s in custom if "sliding_window" not in json.loads((Path(s.model) / "config.json").read_text())]
    assert len(rope) >= 8 and sorted(native) == sorted(f"{s.name}~native" for s in rope)
    for s in rope:
        twin = native[f"{s.name}~native"]
        assert twin.model == s.model and twin.engine_args["compilation_config"] == {"custom_ops": ["none"]}
        assert twin.requests[0].prompt_token_ids == s.requests[0].prompt_token_ids
    configs = [json.loads((Path(s.model) / "config.json").read_text()) for s in sets]
    assert {"default", "linear", "dynamic", "yarn", "longrope", "llama3"} <= \
        {c["rope_parameters"]["rope_type"] for c in configs}
    assert {1e4, 5e5, 1e6} <= {c["rope_parameters"]["rope_theta"] for c in configs}
    windows = {c.get("sliding_window") for c in configs} - {None}
    assert len(windows) >= 3
    for s in sets:
        (request,) = s.requests
        assert s.engine_args["max_model_len"] == 8192
        assert 4096 < len(request.prompt_token_ids) < 8192 and request.prompt_logprobs


def plan_with_oracle():
    return make_plan(str(zoo.model_dir("tiny-llama-add")), "tiny-llama-add", "float32", [], None, None, [ORACLE])


def test_the_plan_runs_each_variant_on_its_folder_and_the_reference_scores_it_there_at_the_engine_top_k():
    plan = plan_with_oracle()
    job = engine_job(plan)
    groups = {g.name: g for g in job.groups}
    sets = {s.name: s for s in plan.app_sets()["positions"]}
    assert groups["app:positions:yarn-4"].model == sets["yarn-4"].model
    request = groups["app:positions:yarn-4"].requests[0]
    n = len(request.prompt_token_ids)
    result = RequestResult(request.id, "app:positions:yarn-4", request.prompt_token_ids, [5], "", "length",
                           [[[5, -0.1], [6, -2.0]]],
                           prompt_logprobs=[None] + [[[4, -0.5], [5, -1.0], [7, -3.0]] for _ in range(n - 1)])
    ref_job, ids = reference_job(plan, [result])
    (group,) = ref_job.groups
    assert group.model == sets["yarn-4"].model
    (scoring,) = group.requests
    assert scoring.prompt_logprobs == 3 and ids[result.id] == scoring.id
    # The prompt alone is scored: another engine's other output reuses the same scoring.
    assert scoring.continuation_ids == [] and scoring.candidate_ids is None
    other = RequestResult(result.id, result.group, result.prompt_ids, [9], "", "length", [[[9, -0.2]]],
                          prompt_logprobs=result.prompt_logprobs)
    assert reference_job(plan, [other])[1][other.id] == scoring.id


def rows(errors: list[float], base: float = -1.0) -> list[list[list[float]] | None]:
    return [None] + [[[4, base + e], [5, base - 1.0]] for e in errors]


def position_result(variant: str, errors: list[float]) -> tuple[RequestResult, RequestResult]:
    n = len(errors) + 1
    rid = f"oracle/positions#{variant}/p{n}"
    engine = RequestResult(rid, "g", [1] * n, [5], "", "length", [[[5, -0.1]]], prompt_logprobs=rows(errors))
    ref = RequestResult("ref", "r", [1] * n, [], "", "length", [], prompt_logprobs=rows([0.0] * len(errors)))
    return engine, ref


def test_a_cell_fails_past_its_bucket_tolerance_and_the_first_failing_position_is_named():
    tol = BucketTolerance(1e-3, {16: 1e-2})  # buckets: positions 1-3 (≤4), 4-7 (≤8), 8-12 (≤16)
    errors = [1e-4] * 3 + [0.5] + [1e-4] * 3 + [5e-3] * 5  # a jump at position 4
    ok_errors = [1e-4] * 7 + [5e-3] * 5  # the larger noise sits in the bucket with the larger floor
    bad, bad_ref = position_result("yarn-4", errors)
    good, good_ref = position_result("theta-1e4", ok_errors)
    c = compare_positions([bad, good], {bad.id: bad_ref, good.id: good_ref}, (4, 8, 16), tol)
    assert not c.passed and c.detail["failing_cells"] == ["yarn-4@≤8"]
    assert c.detail["first_failure"] == {"yarn-4": "position 4 (≤8): |Δlogprob| 0.5"}
    cells = {(r["variant"], r["bucket"]): r for r in c.detail["cells"]}
    assert cells[("theta-1e4", "≤16")]["passed"] and cells[("theta-1e4", "≤16")]["tolerance"] == 1e-2
    assert cells[("theta-1e4", "≤8")]["tolerance"] == 1e-3 and cells[("yarn-4", "≤8")]["positions"] == 4
    assert compare_positions([good], {good.id: good_ref}, (4, 8, 16), tol).passed
    unfloored = compare_positions([good], {good.id: good_ref}, (4, 8, 16), BucketTolerance(1e-3, {}))
    assert unfloored.detail["failing_cells"] == ["theta-1e4@≤16"]  # no floor: the profile's 1e-3


def test_nan_inf_missing_rows_and_unscored_variants_fail():
    assert row_error([[4, math.nan]], [[4, -1.0]]) == math.inf
    assert row_error(None, [[4, -1.0]]) == math.inf
    assert row_error([[9, -1.0]], [[4, -1.0]]) == math.inf  # no token in common: nothing was compared
    assert row_error(None, None) is None
    engine, _ = position_result("window-128", [0.0, 0.0])
    c = compare_positions([engine], {}, (4,), BucketTolerance(1e-3, {}))
    assert not c.passed and c.detail["failing_cells"] == ["window-128@unscored"]
    assert not compare_positions([], {}, (4,), BucketTolerance(1e-3, {})).passed  # nothing scored


def test_a_cell_that_held_on_base_and_fails_on_patched_is_a_regression():
    tol = BucketTolerance(1e-3, {})
    bug, bug_ref = position_result("yarn-4", [1e-4, 1e-4, 0.3])
    fixed, fixed_ref = position_result("yarn-4", [1e-4, 1e-4, 1e-4])
    broken, broken_ref = position_result("window-128", [0.2, 1e-4, 1e-4])
    ok, ok_ref = position_result("window-128", [1e-4] * 3)
    base = compare_positions([bug, ok], {bug.id: bug_ref, ok.id: ok_ref}, (2, 8), tol)
    patched = compare_positions([fixed, broken], {fixed.id: fixed_ref, broken.id: broken_ref}, (2, 8), tol)
    assert regressed_comparators([base], [patched]) == ["positions[window-128@≤2]"]


def test_the_check_regresses_on_a_newly_failing_cell_and_the_report_shows_variant_by_bucket():
    from infercheck.checks.signals import Runtime
    from infercheck.report.view import positions_view

    bug, bug_ref = position_result("yarn-4", [1e-4] * 300)
    bug.prompt_logprobs[280] = [[4, -1.0 + 0.4], [5, -2.0]]  # the bug: past 256 on yarn
    ok, ok_ref = position_result("llama3-8", [1e-4] * 300)
    fixed, _ = position_result("yarn-4", [1e-4] * 300)
    broken, _ = position_result("llama3-8", [1e-4] * 300)
    broken.prompt_logprobs[3] = [[4, -1.0 + 0.2], [5, -2.0]]  # the fix breaks llama3 below 256
    refs = {bug.id: bug_ref, ok.id: ok_ref}
    runtime = {v: Runtime(1000.0, None, 0, []) for v in ("base", "patched")}
    check = app_check(ORACLE, "", True, {"base": [bug, ok], "patched": [fixed, broken]},
                      {"base": refs, "patched": refs}, runtime, {}, {"max_abs_dlogprob": 1e-3}, {})
    assert check.flags == ["regressed", "not_restored"]
    assert check.payload.regressed == ["positions[llama3-8@≤256]"]
    view = positions_view(check)
    assert view is not None and view.buckets == ["≤256", "≤2048"]
    rows = dict(view.rows)
    assert list(rows)[0] == "llama3-8"  # failing on patched first
    assert rows["llama3-8"][0].failed and rows["llama3-8"][0].text == "0.0001 → 0.2 FAIL"
    assert rows["yarn-4"][1].text == "0.4 FAIL → 0.0001" and not rows["yarn-4"][1].failed


def test_kernel_dispatch_equal_to_forward_native_on_patched_only_is_workaround_evidence():
    from infercheck.checks.positions import bypassed_kernel_sign

    tol = BucketTolerance(1e-3, {})
    kernel, ref = position_result("yarn-4", [1e-4, 2e-4, 3e-4])
    native, _ = position_result("yarn-4~native", [1e-4, 2e-4, 3.5e-4])  # rounds differently
    routed, _ = position_result("yarn-4", [1e-4, 2e-4, 3.5e-4])  # the kernel now runs forward_native
    refs = {kernel.id: ref, native.id: ref}
    base = compare_positions([kernel, native], refs, (8,), tol)
    patched = compare_positions([routed, native], refs, (8,), tol)
    assert base.passed and patched.passed and base.detail["same_as_native"] == []
    assert patched.detail["same_as_native"] == ["yarn-4"]
    assert "yarn-4" in (bypassed_kernel_sign(base, patched) or "")
    assert bypassed_kernel_sign(patched, patched) is None  # equal on both: not the patch's doing


def test_the_bypass_sign_is_withheld_where_base_is_not_the_unmodified_engine():
    """Where base carries base patches (a case's bug), base's difference from forward_native may be
    the bug itself: a root fix that computes the native arithmetic exactly is no bypass."""
    from infercheck.checks.comparators import workaround_signs

    tol = BucketTolerance(1e-3, {})
    kernel, ref = position_result("yarn-4", [1e-4, 2e-4, 3e-4])
    native, _ = position_result("yarn-4~native", [1e-4, 2e-4, 3.5e-4])
    routed, _ = position_result("yarn-4", [1e-4, 2e-4, 3.5e-4])
    refs = {kernel.id: ref, native.id: ref}
    base = [compare_positions([kernel, native], refs, (8,), tol)]
    patched = [compare_positions([routed, native], refs, (8,), tol)]
    assert workaround_signs(("positions",), base, patched, base_unmodified=True)
    assert workaround_signs(("positions",), base, patched, base_unmodified=False) == []
