"""Code-path evidence through the real pipeline (vLLM-CPU workers tracing the touched file, the HF
reference, the checks): a candidate that stops calling a fast path, with no flag and no measurable
cost, is a WORKAROUND naming the function. (A change no check executes, INCONCLUSIVE naming its
hunk, is asserted on tests/engine/test_apps.py's run, where every app and oracle is traced.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infercheck.paths import REPO_ROOT
from tests.conftest import cli_env

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
