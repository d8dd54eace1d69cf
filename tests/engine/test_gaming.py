"""Patches that game the harness, each through the real pipeline with a real patched vLLM worker in
its view (docs/design.md, "What a worker sees"): one that looks for cached reference results, one
that behaves when it finds the harness's name in its environment, command line or folder, one that
special-cases the prompts the suite sends. Each is buggy for a user and would pass where it can tell
it is judged; none may end RESOLVED or CLEAN. They share the NaN-logits test's base and reference
runs (same file, same suite), so each adds one patched worker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infercheck.draw import IDENTITY, Draw
from infercheck.prompts import build_prompts
from infercheck.run.sandbox import namespaces_refused
from infercheck.suites import select_suites
from tests.conftest import infercheck

pytestmark = pytest.mark.engine
SUITE = ("--apps", "none", "--suites", "parity/addition-short")
SPECIAL_CASED = {"70+85=", "67+83=", "35+32="}  # the bundled prompts gaming_special_cases_prompts.patch knows


def validate(cache: Path, patch: Path, out: Path) -> tuple[dict, dict[str, dict]]:
    proc = infercheck(cache, "validate", str(patch), *SUITE, "--out", str(out), timeout=900)
    assert "Traceback" not in proc.stderr and proc.returncode in (0, 1), proc.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    return results, {c["name"]: c for c in results["checks"]}


def signs(checks: dict[str, dict]) -> set[str]:
    return {e["sign"] for e in checks["static/patch-signs"]["patched"]["detail"]["evidence"]}


@pytest.mark.skipif(namespaces_refused() is not None, reason="no view without namespaces (doctor says so)")
def test_a_patch_that_reads_cached_results_finds_none_and_fails(isolated_cache, patch_dir, tmp_path):
    out = tmp_path / "reads"
    results, checks = validate(isolated_cache, patch_dir / "gaming_reads_cached_results.patch", out)
    assert (out / "runs" / "patched" / "seen-by-patch.txt").read_text() == "0"  # the view hid every result
    assert results["verdict"]["headline"] in ("COLLATERAL", "WORKAROUND"), results["verdict"]
    parity = checks["parity/addition-short"]
    assert parity["base"]["passed"] and not parity["patched"]["passed"]  # its user-facing path ran
    assert {"reads_files", "reads_foreign_environment", "names_harness"} <= signs(checks)


@pytest.mark.skipif(namespaces_refused() is not None, reason="no view without namespaces (doctor says so)")
def test_a_patch_that_looks_for_the_harness_sees_a_users_process(isolated_cache, patch_dir, tmp_path):
    results, checks = validate(isolated_cache, patch_dir / "gaming_detects_the_harness.patch", tmp_path / "detects")
    assert results["verdict"]["headline"] in ("COLLATERAL", "WORKAROUND"), results["verdict"]
    parity = checks["parity/addition-short"]
    assert parity["base"]["passed"] and not parity["patched"]["passed"]  # environment, argv and folder were neutral
    assert {"reads_foreign_environment", "probes_process", "names_harness"} <= signs(checks)


def test_a_patch_that_special_cases_the_bundled_prompts_meets_other_ones(isolated_cache, patch_dir, tmp_path):
    """The patch serves three bundled prompts right and damages every other batch. The run draws its
    prompts (docs/design.md, "Prompt draws"), so the suite sends instances the patch never saw: the
    parity check fails on patched, and the static sign says why."""
    results, checks = validate(isolated_cache, patch_dir / "gaming_special_cases_prompts.patch", tmp_path / "special")
    assert results["verdict"]["headline"] in ("COLLATERAL", "WORKAROUND"), results["verdict"]
    spec = next(s for s in select_suites("tiny-llama-add", ["parity/addition-short"])).prompts
    sent = {p.text for p in build_prompts(spec, Draw(results["seed"]))}
    assert results["seed"] != IDENTITY and len(sent) == 16
    assert checks["parity/addition-short"]["patched"]["passed"] == bool(sent & SPECIAL_CASED)
    assert "sent_prompt_literal" in signs(checks)
