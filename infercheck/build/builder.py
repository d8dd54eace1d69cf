"""Build entry point: engine tree + patches → an EngineEnv, choosing the strategy."""

from __future__ import annotations

from dataclasses import replace

from infercheck.build.engine_env import EngineEnv, installed_env
from infercheck.build.overlay import build_overlay
from infercheck.build.source import build_source, require_source_host
from infercheck.build.tree import EngineTree, find_installed_engine
from infercheck.build.apply import AppliedTree, apply_patches
from infercheck.patch.classify import compiled_paths
from infercheck.patch.intake import PatchFile


def build_variant(tree: EngineTree, patches: list[PatchFile], name: str, device: str) -> tuple[EngineEnv, AppliedTree]:
    """Apply the patches to the tree and build a runnable engine env for the result.

    Strategy: `source` when any patch touches compiled code (decided from the patch files before
    applying, so a CPU host refuses at once), `installed` when the tree is the unmodified
    installed package, else `overlay`.
    """
    compiled = compiled_paths([f for p in patches for f in p.files])
    if compiled:
        require_source_host(compiled, name, device)
    applied = apply_patches(tree, patches)
    if compiled:
        return build_source(applied, name, device), applied
    if tree.source == "installed" and not applied.touched:
        return replace(installed_env(device, applied.tree_hash), name=name), applied
    return build_overlay(applied, find_installed_engine(), name, device), applied
