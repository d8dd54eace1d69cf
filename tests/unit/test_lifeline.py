"""Cancellation without an engine (run/lifeline.py, cli's SIGTERM handling): a subprocess stops
itself when its harness is SIGKILLed, and SIGTERM to a harness stops its worker's process group
and ends it with 143, as Ctrl-C does with 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from infercheck.paths import REPO_ROOT
from infercheck.run.launcher import is_alive
from tests.conftest import gone_within


def wait_for(path: Path, timeout_s: float = 20.0) -> str:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if path.is_file() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.05)
    raise AssertionError(f"{path} never written")


def harness(tmp_path: Path, body: str) -> subprocess.Popen:
    script = tmp_path / "harness.py"
    script.write_text(textwrap.dedent(body))
    return subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                            stderr=subprocess.PIPE, text=True)


CHILD = ("import time; from infercheck.run.lifeline import watch_harness; assert watch_harness(); "
         "import subprocess; subprocess.Popen(['sleep', '300']); time.sleep(300)")


def test_a_subprocess_stops_itself_and_its_children_when_the_harness_is_killed(tmp_path):
    proc = harness(tmp_path, f"""
        import subprocess, sys, time
        from infercheck.run.lifeline import Lifeline
        with Lifeline() as lifeline:
            child = subprocess.Popen([sys.executable, "-c", {CHILD!r}], env={{**__import__("os").environ, **lifeline.env()}},
                                     pass_fds=(lifeline.read_fd,), start_new_session=True)
            open("child.pid", "w").write(str(child.pid))
            time.sleep(300)
    """)
    child = int(wait_for(tmp_path / "child.pid"))
    time.sleep(1.0)  # the child's watcher is up
    assert is_alive(child)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert gone_within(child, 10.0), "the subprocess outlived its SIGKILLed harness"
    group = subprocess.run(["pgrep", "-g", str(child)], capture_output=True, text=True).stdout.split()
    assert not [p for p in group if is_alive(int(p))], "its own children outlived it"


def test_sigterm_stops_the_worker_and_ends_the_harness_like_ctrl_c(tmp_path):
    proc = harness(tmp_path, """
        import json, sys
        from pathlib import Path
        from infercheck.build.engine_env import EngineEnv
        from infercheck.cli import main
        from infercheck.run import launcher
        from infercheck.run.job import Group, Job, Request
        fake = Path("fake-python")
        fake.write_text("#!/bin/bash\\nsleep 300 & echo $! > child.pid; sleep 300\\n")
        fake.chmod(0o755)
        env = EngineEnv("patched", "overlay", str(fake.resolve()), "t" * 40)
        job = Job("vllm", "/models/x", "float32", [Group("g", {}, [Request(id="r0", prompt="1+1=")])])
        import infercheck.commands as commands
        commands.cmd_models = lambda args: launcher.launch(job, env, Path("out").resolve(), 300).ok
        sys.exit(main(["models", "list"]))
    """)
    out = tmp_path / "out"
    try:
        worker = int(wait_for(out / "worker.pid").split()[0])
    except AssertionError:
        proc.kill()
        raise AssertionError(proc.communicate()[1]) from None
    wait_for(out / "child.pid")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1].startswith("infercheck: SIGTERM after") and "Traceback" not in err, err
    assert gone_within(worker, 5.0)
    assert not os.path.exists(out / "worker.pid")
