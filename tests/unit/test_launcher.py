"""How the launcher records each way a worker can end. The `python` here is a stand-in script:
these tests exercise the harness's process handling, not an engine."""

import fcntl
import json
import stat
import time
from pathlib import Path

import pytest

from infercheck.build.engine_env import EngineEnv
from infercheck.errors import WorkerError
from infercheck.run.job import Group, Job, Request, read_jsonl
from infercheck.run.launcher import classify, launch


def fake_python(tmp_path: Path, body: str) -> EngineEnv:
    script = tmp_path / "fake-python"
    script.write_text("#!/bin/bash\n" + body + "\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return EngineEnv("patched", "overlay", str(script), "t" * 40)


def job() -> Job:
    return Job("vllm", "/models/x", "float32", [Group("g", {}, [Request(id="r0", prompt="1+1=")])])


def test_timeout_kills_worker_and_its_children(tmp_path):
    """The child holds a lock as long as it lives (a pid would not do: inside the worker's own PID
    namespace it names another process out here)."""
    env = fake_python(tmp_path, "flock child.lock sleep 300 & sleep 300")  # in its run folder
    run = launch(job(), env, tmp_path / "out", timeout_s=5)  # room for the sandbox set-up on a loaded machine
    assert not run.ok and run.error_kind == "timeout" and run.returncode is None
    lock = tmp_path / "out" / "child.lock"
    assert lock.exists()  # the child did start
    assert lock_free_within(lock, seconds=10)


def lock_free_within(path: Path, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    with path.open("a") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.1)


def test_signal_death_is_a_crash_with_stderr_tail(tmp_path):
    env = fake_python(tmp_path, "echo 'loading engine' >&2; kill -ABRT $$")
    run = launch(job(), env, tmp_path / "out", timeout_s=30)
    assert run.error_kind == "crash" and "SIGABRT" in run.error and "loading engine" in run.error
    with pytest.raises(WorkerError) as err:
        run.raise_for_error()
    assert "\n" not in str(err.value) and err.value.stderr_tail.endswith("loading engine")


def test_garbage_on_stdout_does_not_confuse_results(tmp_path):
    body = ("head -c 2000 /dev/urandom; "
            "echo '{\"id\": \"r0\", \"group\": \"g\", \"prompt_ids\": [1], \"output_ids\": [2], \"text\": \"2\", "
            "\"finish_reason\": \"length\"}' > results.jsonl; echo '{\"state\": \"done\"}' > status.json")
    run = launch(job(), fake_python(tmp_path, body), tmp_path / "out", timeout_s=30)
    assert run.ok and [r.text for r in run.results()] == ["2"]


def test_reported_error_is_kept(tmp_path):
    body = "echo '{\"state\": \"error\", \"kind\": \"bad_engine_arg\", \"message\": \"unknown engine arg(s) x\"}' > status.json; exit 3"
    run = launch(job(), fake_python(tmp_path, body), tmp_path / "out", timeout_s=30)
    assert (run.error_kind, run.error) == ("bad_engine_arg", "unknown engine arg(s) x")


def test_exit_without_status_is_a_crash(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    run = classify("base", out, 1, 0.1, 10)
    assert run.error_kind == "crash" and "status 1" in run.error


def test_job_file_round_trip(tmp_path):
    run = launch(job(), fake_python(tmp_path, "true"), tmp_path / "out", timeout_s=30)
    data = json.loads((tmp_path / "out" / "job.json").read_text())
    assert Job.from_dict(data) == job() and run.error_kind == "crash"


def test_torn_jsonl_line_is_skipped(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n{"a": ')
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}]


def test_an_orphaned_worker_of_a_killed_harness_is_stopped_before_reuse(tmp_path):
    import subprocess
    import time

    from infercheck.run.launcher import WORKER_PID, start_time, stop_orphan

    out = tmp_path / "out"
    out.mkdir()
    orphan = subprocess.Popen(["bash", "-c", f"exec -a 'python -m infercheck.run.worker --out {out}' sleep 300"],
                              start_new_session=True)
    bystander = subprocess.Popen(["sleep", "300"], start_new_session=True)
    time.sleep(0.2)
    (out / WORKER_PID).write_text(f"{orphan.pid} {start_time(orphan.pid)}\n")
    stop_orphan(out)
    assert orphan.wait(timeout=10) is not None and not (out / WORKER_PID).exists()
    (out / WORKER_PID).write_text(f"{bystander.pid} 1\n")  # the pid, but another process's start: left alone
    stop_orphan(out)
    (out / WORKER_PID).write_text(f"{bystander.pid}\n")  # an old record without a start time: left alone
    stop_orphan(out)
    assert bystander.poll() is None
    bystander.kill()


def test_a_spent_run_budget_starts_no_worker(tmp_path):
    import time

    from infercheck.execute import Runner
    from infercheck.options import ValidateOptions
    from infercheck.run.store import RunOutcome

    env = fake_python(tmp_path, "touch started; echo '{\"state\": \"done\"}' > status.json")
    opts = ValidateOptions(patch=tmp_path / "p.patch", run_timeout_s=5)
    outcome = RunOutcome()
    spent = Runner(opts, tmp_path, lambda m: None, deadline=time.time() - 1)
    run = spent.run(job(), env, "out", outcome)
    assert not run.ok and run.error_kind == "timeout" and "--run-timeout 5s" in run.error
    assert not (tmp_path / "out" / "started").exists()
    assert outcome.workers["out"].error_kind == "timeout"  # recorded for the grade stage
    ok = Runner(opts, tmp_path, lambda m: None, deadline=time.time() + 30).run(job(), env, "out2", outcome)
    assert ok.ok and (tmp_path / "out2" / "started").exists() and outcome.workers["out2"].ok
