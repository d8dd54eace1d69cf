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
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from infercheck.build.engine_env import EngineEnv
from infercheck.device import detect_device
from infercheck.paths import REPO_ROOT, cache_dir, reports_dir
from infercheck.run import engine_state
from infercheck.run.lifeline import Lifeline
import infercheck.run.sandbox as sandbox
from infercheck.run.sandbox import (Containment, limit_resources, plan_containment, private_environ, worker_status,
                                    wrap_command)
from infercheck.errors import WorkerError
from infercheck.run.job import (GROUPS, JOB_DIGESTS, JOB_FILE, LM_EVAL, RESULTS, STATUS, STDERR, STDOUT, TIMING,
                                GroupResult, Job, RequestResult, read_jsonl)
from infercheck.run.progress import PROGRESS, WorkerProgress
from infercheck.run.view import WorkerView, neutral_environ, plan_view, view_job

Watch = Callable[[WorkerProgress], None]  # told a running worker's progress
POLL_S = 0.5

DEFAULT_TIMEOUT_S = 900.0
CONTAINMENT = "containment.json"  # what the worker was held to (infercheck.run.sandbox)
WORKER_PID = "worker.pid"  # the live worker's pid (= its process group) and start time, removed when it ends
# Harness records a worker must not find in its folder (they name host paths): written after it ends.
REUSED_FROM = "reused-from"  # in a run folder: which cache entries its rows came from
HARNESS_RECORDS = (CONTAINMENT, REUSED_FROM)
HARNESS_CODE = Path(__file__).resolve().parent.parent  # the infercheck package: the worker code is part of it
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


def covered_folders(out_dir: Path) -> list[Path]:
    """What a worker's view hides (run/view.py): the harness's repository, the result cache, the
    reports, the run folder this worker's folder belongs to, the user's home and the temporary folder."""
    return [REPO_ROOT, cache_dir(), reports_dir(), out_dir.resolve().parent.parent, Path.home(), Path("/tmp"),
            Path(tempfile.gettempdir())]


def worker_view(job: Job, env: EngineEnv, out_dir: Path, environ: dict[str, str]) -> WorkerView | str:
    """The worker's view, or why it gets none (namespaces refused, no neutral root)."""
    refused = sandbox.namespaces_refused()
    if refused is not None:
        return refused
    return plan_view(job, env.python, env.pythonpath, HARNESS_CODE, environ.get("HF_HOME"), out_dir,
                     covered_folders(out_dir))


# How a worker is started: here (launch) or elsewhere (run/ray_pool.py); same arguments, same record.
Launcher = Callable[[Job, EngineEnv, Path, float, Watch | None], WorkerRun]


def launch(job: Job, env: EngineEnv, out_dir: Path, timeout_s: float = DEFAULT_TIMEOUT_S,
           watch: Watch | None = None) -> WorkerRun:
    """Run the job in a contained worker subprocess of `env` (infercheck.run.sandbox), in its own view
    where the platform allows one (infercheck.run.view); never raises for worker failures. `watch`
    is told the worker's progress while it runs (infercheck.run.progress)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in (RESULTS, GROUPS, LM_EVAL, STATUS, TIMING, PROGRESS, *HARNESS_RECORDS):
        (out_dir / stale).unlink(missing_ok=True)
    containment = replace(containment_for(job, timeout_s), cpus=env.cpus)
    environ = private_environ(env.environ(), out_dir)
    engine_state.seed(out_dir)
    view = worker_view(job, env, out_dir, environ)
    if isinstance(view, WorkerView):
        containment = replace(containment, view=view.as_record(), notes=(*containment.notes, *view.notes))
        (out_dir / JOB_FILE).write_text(view_job(job, view).to_json())
        cmd = wrap_command([view.python, f"{view.root}/bin/main.py", "--job", f"{view.out_dir()}/{JOB_FILE}",
                            "--out", view.out_dir()], out_dir, containment, view.sandbox_args())
    else:
        containment = replace(containment, notes=(*containment.notes, f"no view of its own ({view}): the worker "
                                                  "sees the host's paths"))
        (out_dir / JOB_FILE).write_text(job.to_json())
        cmd = wrap_command([env.python, "-m", "infercheck.run.worker", "--job", str(out_dir / JOB_FILE), "--out",
                            str(out_dir)], out_dir, containment)
    (out_dir / JOB_DIGESTS).write_text(json.dumps(job.digests()))
    environ = neutral_environ(environ, view if isinstance(view, WorkerView) else None)
    started = time.time()
    try:
        returncode = run_contained(cmd, environ, out_dir, containment, timeout_s, watch)
    finally:
        (out_dir / CONTAINMENT).write_text(json.dumps(containment.as_record()))
    engine_state.keep(env.name, out_dir)
    return classify(env.name, out_dir, returncode, round(time.time() - started, 3), timeout_s)


def run_contained(cmd: list[str], environ: dict[str, str], out_dir: Path, containment: Containment,
                  timeout_s: float, watch: Watch | None = None, cwd: Path | None = None) -> int | None:
    """Run a wrapped command (run/sandbox.py) in its own session under the containment's limits and
    the harness's lifeline, in `cwd` (default out_dir; a view sets its own), stdout and stderr into
    out_dir. Returns its status (a death by signal N as -N), None when it ran past timeout_s (its
    process group killed). When the harness itself is interrupted the group is killed and the
    interruption goes on."""
    stop_orphan(out_dir)
    with open(out_dir / STDOUT, "wb") as out, open(out_dir / STDERR, "wb") as err, Lifeline() as lifeline:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                env={**environ, **lifeline.env()}, cwd=cwd or out_dir, start_new_session=True,
                                preexec_fn=limit_resources(containment), pass_fds=(lifeline.read_fd,))
        (out_dir / WORKER_PID).write_text(f"{proc.pid} {start_time(proc.pid)}\n")
        try:
            returncode: int | None = worker_status(wait_watching(proc, timeout_s, out_dir, watch), containment)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            returncode = None
        except BaseException:  # the harness itself is interrupted: never leave an engine running
            kill_group(proc, grace_s=2.0)
            raise
        finally:
            (out_dir / WORKER_PID).unlink(missing_ok=True)  # ended or stopped: nothing for a later run to stop
    return returncode


def wait_watching(proc: subprocess.Popen, timeout_s: float, out_dir: Path, watch: Watch | None) -> int:
    """proc.wait(timeout_s), telling `watch` the worker's progress every POLL_S meanwhile."""
    if watch is None:
        return proc.wait(timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return proc.wait(timeout=max(0.0, min(POLL_S, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise
            state = WorkerProgress.read(out_dir)
            if state is not None:
                watch(state)


def start_time(pid: int) -> str:
    """A process's start time (clock ticks after boot, /proc/PID/stat field 22): with the pid, it
    names one process, whatever its command line shows; "" where it cannot be read."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[19]
    except (OSError, IndexError):
        return ""


def stop_orphan(out_dir: Path) -> None:
    """A worker left running by a harness that was killed (kill -9) still writes into out_dir: stop
    its process group before anything reuses the folder. Only the process of the recorded pid and
    start time is touched (a pid reused since is another process)."""
    try:
        pid_text, started = ((out_dir / WORKER_PID).read_text().split() + [""])[:2]
        pid = int(pid_text)
    except (OSError, ValueError):
        (out_dir / WORKER_PID).unlink(missing_ok=True)
        return
    if started and start_time(pid) == started:
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
