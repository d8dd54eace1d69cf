"""Run a symptom's pytest node id in a variant's engine env (FAIL_TO_PASS, as SWE-bench does)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from infercheck.build.engine_env import EngineEnv
from infercheck.run.lifeline import Lifeline
from infercheck.run.store import PytestOutcome
from infercheck.specs import SymptomSpec


def run_pytest(spec: SymptomSpec, env: EngineEnv, out_dir: Path, timeout_s: float,
               trace: list[str] | None = None) -> PytestOutcome:
    """The node id is relative to the symptom file's folder; the full log lands in out_dir. With
    `trace` (engine files), the run is traced like a worker's group (run/traced_pytest.py)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    cwd = Path(spec.path).parent
    args = ["-q", "-p", "no:cacheprovider", str(spec.pytest)]
    runner = ["-m", "infercheck.run.traced_pytest", "--out", str(out_dir.resolve()), "--trace", *(trace or []), "--"]
    cmd = [env.python, *runner, *args]
    try:
        with Lifeline() as lifeline:  # the run stops itself if the harness dies (run/lifeline.py)
            proc = subprocess.run(cmd, cwd=cwd, env={**env.environ(), **lifeline.env()}, capture_output=True,
                                  text=True, timeout=timeout_s, start_new_session=True, pass_fds=(lifeline.read_fd,))
    except subprocess.TimeoutExpired:
        return PytestOutcome(False, None, f"timed out after {timeout_s:g}s")
    (out_dir / "pytest.log").write_text(proc.stdout + proc.stderr)
    tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-8:])
    return PytestOutcome(proc.returncode == 0, proc.returncode, tail)
