"""Start a worker subprocess for one variant and turn every way it can end into a record.

The worker runs in its own session (process group) with the variant's engine env; stdout and
stderr go to files in the output folder, so garbage on stdout never confuses the harness. A
timeout kills the whole group. The outcome is a WorkerRun; `raise_for_error` turns a failed one
into a one-line WorkerError with the last stderr lines kept for the report.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from infercheck.build.engine_env import EngineEnv
from infercheck.device import detect_device
from infercheck.paths import REPO_ROOT, cache_dir
from infercheck.run.lifeline import Lifeline
from infercheck.run.sandbox import Containment, limit_resources, plan_containment, private_environ, wrap_command
from infercheck.errors import WorkerError
from infercheck.run.job import (GROUPS, JOB_FILE, LM_EVAL, RESULTS, STATUS, STDERR, STDOUT, GroupResult, Job,
                                RequestResult, read_jsonl)

DEFAULT_TIMEOUT_S = 900.0
CONTAINMENT = "containment.json"  # what the worker was held to (infercheck.run.sandbox)
WORKER_PID = "worker.pid"  # the live worker's pid (= its process group), removed when it ends
STDERR_TAIL_LINES = 12


@dataclass
class WorkerRun:
    variant: str
    out_dir: Path
    ok: bool
    returncode: int | None
    elapsed_s: float
    error_kind: str | None = None  # bad_engine_arg | exception | crash | timeout | ...
    error: str | None = None
    stderr_tail: str = ""

    def results(self) -> list[RequestResult]:
        return [RequestResult.from_dict(r) for r in read_jsonl(self.out_dir / RESULTS)]

    def groups(self) -> list[GroupResult]:
        return [GroupResult(**g) for g in read_jsonl(self.out_dir / GROUPS)]

    def raise_for_error(self) -> "WorkerRun":
        if not self.ok:
            raise WorkerError(f"{self.variant} worker failed ({self.error_kind}): {self.error}",
                              kind=self.error_kind or "crash", stderr_tail=self.stderr_tail)
        return self


def stderr_tail(path: Path, lines: int = STDERR_TAIL_LINES) -> str:
    if not path.is_file():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def containment_for(job: Job, timeout_s: float) -> Containment:
    needs_network = any(t.include_defaults for g in job.groups for t in g.lm_eval)
    return plan_containment(detect_device(), timeout_s, [REPO_ROOT, cache_dir()], needs_network)


def launch(job: Job, env: EngineEnv, out_dir: Path, timeout_s: float = DEFAULT_TIMEOUT_S) -> WorkerRun:
    """Run the job in a contained worker subprocess of `env` (infercheck.run.sandbox); never raises
    for worker failures."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in (RESULTS, GROUPS, LM_EVAL, STATUS):
        (out_dir / stale).unlink(missing_ok=True)
    job_path = out_dir / JOB_FILE
    job_path.write_text(job.to_json())
    containment = containment_for(job, timeout_s)
    (out_dir / CONTAINMENT).write_text(json.dumps(containment.as_record()))
    cmd = wrap_command([env.python, "-m", "infercheck.run.worker", "--job", str(job_path), "--out", str(out_dir)],
                       out_dir, containment)
    started = time.time()
    stop_orphan(out_dir)
    with open(out_dir / STDOUT, "wb") as out, open(out_dir / STDERR, "wb") as err, Lifeline() as lifeline:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                env={**private_environ(env.environ(), out_dir), **lifeline.env()}, cwd=out_dir,
                                start_new_session=True, preexec_fn=limit_resources(containment),
                                pass_fds=(lifeline.read_fd,))
        (out_dir / WORKER_PID).write_text(f"{proc.pid}\n")
        try:
            returncode: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            returncode = None
        except BaseException:  # the harness itself is interrupted: never leave an engine running
            kill_group(proc, grace_s=2.0)
            (out_dir / WORKER_PID).unlink(missing_ok=True)  # stopped: nothing for a later run to stop
            raise
    elapsed = round(time.time() - started, 3)
    (out_dir / WORKER_PID).unlink(missing_ok=True)
    return classify(env.name, out_dir, returncode, elapsed, timeout_s)


def stop_orphan(out_dir: Path) -> None:
    """A worker left running by a harness that was killed (kill -9) still writes into out_dir: stop
    its process group before anything reuses the folder. Only a process whose command line names
    this folder's worker is touched."""
    try:
        pid = int((out_dir / WORKER_PID).read_text().split()[0])
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (OSError, ValueError, IndexError):
        (out_dir / WORKER_PID).unlink(missing_ok=True)
        return
    if "infercheck.run.worker" in cmdline and str(out_dir) in cmdline:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                break
            deadline = time.time() + 5.0
            while is_alive(pid) and time.time() < deadline:
                time.sleep(0.1)
    (out_dir / WORKER_PID).unlink(missing_ok=True)


def is_alive(pid: int) -> bool:
    """Running (not gone, not a zombie waiting for its parent)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def kill_group(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """SIGTERM the worker's process group, then SIGKILL whatever is left of it."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass


def classify(variant: str, out_dir: Path, returncode: int | None, elapsed: float, timeout_s: float) -> WorkerRun:
    """Decide how the worker ended from its exit status and status.json."""
    tail = stderr_tail(out_dir / STDERR)
    run = WorkerRun(variant, out_dir, False, returncode, elapsed, stderr_tail=tail)
    status = _read_status(out_dir)
    if returncode is None:
        run.error_kind, run.error = "timeout", f"no result within {timeout_s:g}s (hung or too slow); killed"
    elif status.get("state") == "done" and returncode == 0:
        run.ok = True
    elif status.get("state") == "error":
        run.error_kind, run.error = status.get("kind", "exception"), status.get("message", "")
    elif returncode < 0:
        name = signal.Signals(-returncode).name if -returncode in signal.valid_signals() else str(-returncode)
        run.error_kind, run.error = "crash", f"killed by {name}{_last_line_hint(tail)}"
    else:
        run.error_kind, run.error = "crash", f"exited with status {returncode}{_last_line_hint(tail)}"
    return run


def _last_line_hint(tail: str) -> str:
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    return f"; last stderr line: {lines[-1][:200]}" if lines else ""


def _read_status(out_dir: Path) -> dict:
    try:
        return json.loads((out_dir / STATUS).read_text())
    except (OSError, json.JSONDecodeError):
        return {}
