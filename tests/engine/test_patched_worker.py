"""A real patch to a vllm Python module, built as an overlay: the patched worker sees it, the
base worker does not, and the installed package is byte-identical afterwards."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from infercheck.build.builder import build_variant
from infercheck.patch.intake import read_patch
from infercheck.build.tree import engine_tree, find_installed_engine
from infercheck.run.job import Group
from tests.engine.conftest import greedy_requests, parity_prompts, run_job

pytestmark = pytest.mark.engine


def package_digest(package_dir: Path) -> str:
    """sha256 over every file of the installed package except bytecode caches."""
    h = hashlib.sha256()
    for path in sorted(package_dir.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            h.update(str(path.relative_to(package_dir)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def test_overlay_patch_changes_patched_worker_only(tmp_path, patch_dir, llama_runs):
    installed = find_installed_engine()
    before = package_digest(installed.package_dir)
    patched_env, applied = build_variant(engine_tree(), [read_patch(patch_dir / "greedy_runner_up.patch")], "patched", "cpu")
    assert patched_env.strategy == "overlay" and applied.touched == ("vllm/v1/sample/sampler.py",)

    prompts = parity_prompts()[:4]
    groups = [Group("g", {}, greedy_requests("p", prompts, 6))]
    patched = {r.id: r for r in run_job("vllm", "tiny-llama-add", groups, tmp_path / "patched", patched_env).results()}
    base = {r.id: r for r in llama_runs["vllm"].results() if r.group == "parity"}

    for rid, result in patched.items():
        # the patch makes greedy pick the runner-up: each step's token is the second-ranked one
        assert result.output_ids != base[rid].output_ids
        assert all(pos[1][0] == tok for pos, tok in zip(result.logprobs, result.output_ids))
        # base greedy picks the top-ranked token
        assert all(pos[0][0] == tok for pos, tok in zip(base[rid].logprobs, base[rid].output_ids))
    assert package_digest(installed.package_dir) == before
