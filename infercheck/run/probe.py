"""Ask a variant's interpreter for its versions (vllm, torch, …) in a subprocess."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from infercheck.build.engine_env import EngineEnv
from infercheck.errors import WorkerError


def probe_env(env: EngineEnv, out_dir: Path, timeout_s: float = 300.0) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.run([env.python, "-m", "infercheck.run.worker", "--probe"], capture_output=True,
                              env=env.environ(), timeout=timeout_s, cwd=out_dir)
    except subprocess.TimeoutExpired:
        raise WorkerError(f"{env.name} probe timed out after {timeout_s:g}s", kind="timeout") from None
    (out_dir / "probe.stderr").write_bytes(proc.stderr)
    lines = proc.stdout.decode(errors="replace").strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        raise WorkerError(f"{env.name} probe failed (exit {proc.returncode})", kind="crash") from None
