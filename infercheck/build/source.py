"""The `source` build: `pip install` of the engine tree into its own venv (compiled changes).

Compiling vLLM needs a CUDA toolchain and tens of minutes; on a CPU host it stops with one clear
line naming the files that need it.
"""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
from pathlib import Path

from infercheck.build.engine_env import EngineEnv, default_engine_vars
from infercheck.build.tree import run_git_bytes
from infercheck.errors import BuildError
from infercheck.locks import file_lock
from infercheck.build.apply import AppliedTree
from infercheck.paths import cache_dir

BUILD_TIMEOUT_S = 4 * 3600


def source_build_commands(src: Path, venv: Path) -> list[list[str]]:
    """The real build: a venv, then pip builds and installs the tree (CUDA target)."""
    return [
        [sys.executable, "-m", "venv", str(venv)],
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--upgrade", "pip"],
        [str(venv / "bin" / "python"), "-m", "pip", "install", str(src), str(Path(__file__).resolve().parents[2])],
    ]


def require_source_host(compiled: list[str], name: str, device: str) -> None:
    """Stop with one line on a host that cannot compile the engine."""
    if device != "cuda":
        shown = ", ".join(compiled[:5]) + (f" (+{len(compiled) - 5} more)" if len(compiled) > 5 else "")
        raise BuildError(f"{name}: patch touches compiled code ({shown}); it needs a `source` build "
                         f"(pip install of the engine tree with a CUDA toolchain), which this CPU host cannot run")


def build_source(applied: AppliedTree, name: str, device: str) -> EngineEnv:
    require_source_host(list(applied.touched), name, device)
    root = cache_dir() / "builds"
    folder = root / f"source-{applied.tree_hash[:16]}"
    venv = folder / "venv"
    with file_lock(root / f".{folder.name}.lock"):
        if not (folder / "ready").is_file():
            src = folder / "src"
            src.mkdir(parents=True, exist_ok=True)
            archive = run_git_bytes(applied.tree.repo_dir, "archive", "--format=tar", applied.tree_hash)
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                tar.extractall(src, filter="data")
            log = (folder / "build.log").open("w")
            for cmd in source_build_commands(src, venv):
                env = {"VLLM_TARGET_DEVICE": "cuda", "PATH": "/usr/local/cuda/bin:/usr/bin:/bin"}
                proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=BUILD_TIMEOUT_S)
                if proc.returncode != 0:
                    raise BuildError(f"{name}: source build failed ({' '.join(cmd[:4])}…); see {folder / 'build.log'}")
            (folder / "ready").write_text(applied.tree_hash + "\n")
    return EngineEnv(name, "source", str(venv / "bin" / "python"), applied.tree_hash, (),
                     default_engine_vars(device), str(folder))
