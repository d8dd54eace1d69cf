"""Apply patches to an engine tree in a temporary index; the result is a git tree hash."""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from infercheck.build.tree import EngineTree, run_git, run_git_bytes
from infercheck.errors import InfercheckError
from infercheck.patch.intake import PatchFile


@dataclass(frozen=True)
class AppliedTree:
    tree: EngineTree
    tree_hash: str  # git tree of base + patches: the build cache key
    patches: tuple[str, ...]
    touched: tuple[str, ...]  # paths that differ from the tree's base commit


def apply_patches(tree: EngineTree, patches: list[PatchFile]) -> AppliedTree:
    """Apply each patch in order (plain, then 3-way); refuse one that does not apply."""
    with tempfile.TemporaryDirectory(prefix="infercheck-index-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        run_git(tree.repo_dir, "read-tree", tree.base_commit, env=env)
        for patch in patches:
            _apply_one(tree, patch, env)
        tree_hash = run_git(tree.repo_dir, "write-tree", env=env).strip()
    touched = run_git(tree.repo_dir, "diff-tree", "-r", "--no-renames", "--name-only",
                      f"{tree.base_commit}^{{tree}}", tree_hash).split()
    return AppliedTree(tree, tree_hash, tuple(str(p.path) for p in patches), tuple(touched))


def _apply_one(tree: EngineTree, patch: PatchFile, env: dict[str, str]) -> None:
    """git apply, then git apply --3way, then patch -p1 with fuzz (all into the temporary index)."""
    errors = []
    for mode in (["--cached"], ["--cached", "--3way"]):
        try:
            run_git(tree.repo_dir, "apply", *mode, "-", env=env, input_bytes=patch.text.encode())
            return
        except subprocess.CalledProcessError as exc:
            lines = exc.stderr.decode(errors="replace").strip().splitlines()
            errors.append(lines[-1] if lines else f"git apply exit {exc.returncode}")
    if not _apply_with_fuzz(tree, patch, env):
        raise InfercheckError(f"patch does not apply: {patch.path.name}: {errors[0]}")


def _apply_with_fuzz(tree: EngineTree, patch: PatchFile, env: dict[str, str]) -> bool:
    """`patch -p1 --fuzz` on a scratch copy of the touched files, written back into the index."""
    with tempfile.TemporaryDirectory(prefix="infercheck-fuzz-") as tmp:
        work = Path(tmp) / "tree"
        work.mkdir()
        for rel in patch.files:
            try:
                content = run_git_bytes(tree.repo_dir, "show", f":{rel}", env=env)
            except subprocess.CalledProcessError:
                continue  # a file the patch creates
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_bytes(content)
        proc = subprocess.run(["patch", "-p1", "--fuzz=3", "--batch", "--forward", "--no-backup-if-mismatch",
                               "--reject-file=-", "-d", str(work)], input=patch.text.encode(), capture_output=True)
        if proc.returncode != 0:
            return False
        for rel in patch.files:
            target = work / rel
            if target.is_file():
                sha = run_git(tree.repo_dir, "hash-object", "-w", str(target), env=env).strip()
                run_git(tree.repo_dir, "update-index", "--add", "--cacheinfo", f"100644,{sha},{rel}", env=env)
            else:
                run_git(tree.repo_dir, "update-index", "--force-remove", rel, env=env)
    return True
