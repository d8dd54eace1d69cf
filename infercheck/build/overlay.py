"""The `overlay` build: a hard-linked copy of the installed package with changed files written anew.

Unchanged files (bytecode included) are hard links to the installed ones, so an overlay costs
seconds and almost no disk. A changed file is first unlinked, then written as a new file: neither
the installed package nor a hard-linked original is ever modified in place. The overlay folder goes
first on PYTHONPATH. Overlays are cached by tree hash and created atomically (temp dir + rename).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from infercheck.build.engine_env import EngineEnv, default_engine_vars
from infercheck.build.tree import PACKAGE, InstalledEngine, run_git, run_git_bytes
from infercheck.locks import file_lock
from infercheck.build.apply import AppliedTree
from infercheck.paths import cache_dir

READY = "overlay.json"


def build_overlay(applied: AppliedTree, engine: InstalledEngine, name: str, device: str) -> EngineEnv:
    root = cache_dir() / "builds"
    folder = root / f"overlay-{applied.tree_hash[:16]}"
    with file_lock(root / f".{folder.name}.lock"):
        if not (folder / READY).is_file():
            _materialize(applied, engine, folder)
    return EngineEnv(name, "overlay", sys.executable, applied.tree_hash, (str(folder),),
                     default_engine_vars(device), str(folder))


def changed_files(applied: AppliedTree) -> tuple[list[str], list[str]]:
    """(written, deleted) package paths of the applied tree relative to the installed files.

    Written: every file under vllm/ whose content differs from the installed snapshot. Deleted:
    only what the patches themselves deleted (a checkout lacks generated files that must stay).
    """
    repo = applied.tree.repo_dir
    vs_installed = run_git(repo, "diff-tree", "-r", "--no-renames", "--name-status",
                           applied.tree.installed_commit, applied.tree_hash, "--", f"{PACKAGE}/")
    written = [line.split("\t", 1)[1] for line in vs_installed.splitlines() if line[:1] in "AMT"]
    vs_base = run_git(repo, "diff-tree", "-r", "--no-renames", "--name-status", "--diff-filter=D",
                      applied.tree.base_commit, applied.tree_hash, "--", f"{PACKAGE}/")
    deleted = [line.split("\t", 1)[1] for line in vs_base.splitlines()]
    return written, deleted


def _materialize(applied: AppliedTree, engine: InstalledEngine, folder: Path) -> None:
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}-"))
    try:
        link_tree(engine.package_dir, tmp / PACKAGE)
        written, deleted = changed_files(applied)
        for rel in written:
            blob = run_git_bytes(applied.tree.repo_dir, "cat-file", "blob", f"{applied.tree_hash}:{rel}")
            replace_file(tmp / rel, blob)
        for rel in deleted:
            target = tmp / rel
            if target.exists():
                target.unlink()
        meta = {"tree_hash": applied.tree_hash, "installed": str(engine.package_dir),
                "version": engine.version, "written": written, "deleted": deleted}
        (tmp / READY).write_text(json.dumps(meta, indent=2) + "\n")
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def link_tree(src: Path, dst: Path) -> None:
    """Mirror src into dst with hard links (copies where linking is impossible)."""
    for dirpath, _dirnames, filenames in os.walk(src):
        rel = Path(dirpath).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for fname in filenames:
            source, target = Path(dirpath) / fname, dst / rel / fname
            try:
                os.link(source, target)
            except OSError as exc:
                if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
                    raise
                shutil.copy2(source, target)


def replace_file(path: Path, content: bytes) -> None:
    """Write content as a new inode: unlink first so a hard-linked original stays untouched."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        path.unlink()
    with open(path, "xb") as fh:
        fh.write(content)
