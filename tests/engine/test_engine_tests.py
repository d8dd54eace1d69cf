"""The engine's own tests as judges through the real pipeline (docs/design.md, "Engine tests"): on
the bundled prefix-caching case, a candidate that chains the parent hash but drops the extra keys
breaks a hashing property vLLM's own tests check (a cache salt equal to a LoRA name must not share
that LoRA's blocks), and the engine-tests check names that test as COLLATERAL evidence; the tests the
bug breaks and the root fix repairs are FAIL_TO_PASS."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infercheck.paths import REPO_ROOT
from tests.conftest import cli_env

pytestmark = pytest.mark.engine

CASE = REPO_ROOT / "patches" / "prefix-hash-unchained"
SALT_TEST = "tests/v1/core/test_kv_cache_utils.py::test_lora_name_and_cache_salt_block_hashes_do_not_collide"


def engine_tests(cache: Path, out: Path, candidate: str) -> tuple[dict, dict]:
    proc = subprocess.run([sys.executable, "-m", "infercheck.cli", "validate", str(CASE / "fixes" / candidate),
                           "--case", str(CASE), "--apps", "none",
                           "--suites", "parity/addition-short", "--out", str(out)],
                          capture_output=True, text=True, env=cli_env(cache), timeout=1800)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    (check,) = [c for c in results["checks"] if c["kind"] == "engine_tests"]
    return results, check


def test_a_candidate_that_drops_the_extra_keys_is_flagged_by_a_named_engine_test(session_cache, tmp_path):
    results, check = engine_tests(session_cache, tmp_path / "drop", "chain-without-extra-keys.patch")
    broken = [t["test"] for t in check["payload"]["broken"]]
    assert any(t.startswith(SALT_TEST) for t in broken), check["payload"]
    assert "regressed" in check["flags"]
    assert results["verdict"]["headline"] == "COLLATERAL"
    assert any(f["check"] == "engine-tests" and SALT_TEST in f["message"] for f in results["verdict"]["flags"])
    assert all(t["message"] for t in check["payload"]["broken"])  # the assertion's first line


def test_the_root_fix_passes_every_engine_test_the_bug_broke(session_cache, tmp_path):
    _, check = engine_tests(session_cache, tmp_path / "root", "root-chain-parent.patch")
    assert check["flags"] == [] and check["payload"]["fixed"] and not check["payload"]["broken"]
