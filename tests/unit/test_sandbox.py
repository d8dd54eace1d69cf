"""Worker containment, exercised with a stand-in worker script (no engine): what it may write, its
private dirs, its network, its limits."""

import json
import stat
from pathlib import Path

import pytest

from infercheck.build.engine_env import EngineEnv
from infercheck.run.job import Group, Job, LmEvalTask, Request
from infercheck.run.launcher import CONTAINMENT, launch
from infercheck.run.sandbox import (Containment, describe, namespaces_refused, pid_namespace_refused,
                                    plan_containment, worker_status)

PROBE = """#!/bin/bash
{ if [ -z "$(ls -A "@CACHE@" 2>/dev/null)" ]; then echo cache=hidden; elif touch "@CACHE@/written-by-worker" 2>/dev/null; then
    echo cache=writable; else echo cache=read-only; fi
  touch "$PWD/own-folder" && echo own=writable
  echo "home=$HOME tmp=$TMPDIR"
  echo "harness-vars=$(env | grep -ci infercheck)"
  echo "links=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ' ')"
  echo "as=$(ulimit -v) cpu=$(ulimit -t)"
  echo "processes=$(ls /proc | grep -c '^[0-9]')"; } > probe.txt
echo '{"state": "done"}' > status.json
"""


def probe_env(tmp_path: Path) -> EngineEnv:
    script = tmp_path / "fake-python"
    script.write_text(PROBE.replace("@CACHE@", str(tmp_path / "cache")))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return EngineEnv("patched", "overlay", str(script), "t" * 40)


def job(hub: bool = False) -> Job:
    tasks = [LmEvalTask("gsm8k", "accuracy/gsm8k", "/x", include_defaults=True)] if hub else []
    return Job("vllm", "/models/x", "float32", [Group("g", {}, [Request(id="r0", prompt="1+1=")], tasks)])


def test_a_contained_worker_writes_only_its_own_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERCHECK_DEVICE", "cpu")
    out = tmp_path / "cache" / "runs" / "w"  # a run folder inside the cache, as doctor's are
    (tmp_path / "cache").mkdir()
    monkeypatch.setenv("INFERCHECK_CACHE", str(tmp_path / "cache"))
    run = launch(job(), probe_env(tmp_path), out, timeout_s=60)
    assert run.ok, run.stderr_tail
    text = (out / "probe.txt").read_text()
    probe = dict(line.split("=", 1) for line in text.split("\n")[:2])
    assert probe["own"] == "writable" and "harness-vars=0" in text  # no INFERCHECK_* reaches the worker
    assert f"cpu={60 * __import__('os').cpu_count() + 60}" in text and "as=16777216" in text  # KiB
    record = json.loads((out / CONTAINMENT).read_text())
    if namespaces_refused() is None:  # its own view: the cache hidden, home and tmp in its run folder
        root = record["view"]["root"]
        assert probe["cache"] == "hidden" and not (tmp_path / "cache" / "written-by-worker").exists()
        assert f"home={root}/run/home tmp={root}/run/tmp" in text and (out / "own-folder").is_file()
        assert "links=lo \n" in text and record["network"] == "isolated"
        assert str(tmp_path / "cache") in record["view"]["masks"] and "a view at" in describe(record)
        if pid_namespace_refused() is None:  # /proc shows the worker's own few processes, not the host's
            assert record["own_pids"] and "own PID namespace" in describe(record)
            assert int(text.split("processes=")[1].split()[0]) < 10
    else:
        assert f"home={out / 'home'} tmp={out / 'tmp'}" in text
        assert record["notes"] and "not isolated" in record["network"]


def test_containment_plan_and_description(monkeypatch):
    monkeypatch.delenv("INFERCHECK_WORKER_MEMORY_GB", raising=False)
    cuda = plan_containment("cuda", 100, [], needs_network=False)
    assert cuda.memory_bytes is None and any("CUDA" in n for n in cuda.notes)
    hub = plan_containment("cpu", 100, [], needs_network=True)
    assert hub.network.startswith("allowed") and hub.memory_bytes == 16 * 1024**3
    monkeypatch.setenv("INFERCHECK_WORKER_MEMORY_GB", "2")
    small = plan_containment("cpu", 100, [Path("/nonexistent-path")], needs_network=False)
    assert small.memory_bytes == 2 * 1024**3 and small.read_only == ()
    assert "address space ≤ 2 GiB" in describe(small.as_record())


def test_hub_tasks_keep_the_network(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERCHECK_DEVICE", "cpu")
    out = tmp_path / "w"
    assert launch(job(hub=True), probe_env(tmp_path), out, timeout_s=60).ok
    if namespaces_refused() is None:
        assert json.loads((out / CONTAINMENT).read_text())["network"].startswith("allowed")
        assert "links=lo \n" not in (out / "probe.txt").read_text()  # the host's devices, not only loopback
    else:
        pytest.skip(f"namespaces refused here: {namespaces_refused()}")


def test_without_namespaces_the_worker_still_runs_and_says_so(tmp_path, monkeypatch):
    from infercheck.run import sandbox

    monkeypatch.setenv("INFERCHECK_DEVICE", "cpu")
    monkeypatch.setattr(sandbox, "namespaces_refused", lambda: "unshare refused: Operation not permitted")
    out = tmp_path / "w"
    run = launch(job(), probe_env(tmp_path), out, timeout_s=60)
    record = json.loads((out / CONTAINMENT).read_text())
    assert run.ok and "own=writable" in (out / "probe.txt").read_text()
    assert record["network"] == "not isolated (unshare refused: Operation not permitted)" and record["notes"]
    assert record["read_only"] == [] and record["view"] is None and "harness and cache writable" in describe(record)
    assert any("no view of its own" in note for note in record["notes"])


def test_a_worker_killed_by_a_signal_is_named_so_inside_its_pid_namespace(tmp_path, monkeypatch):
    """The wrapper stays PID 1 of the worker's namespace and hands back 128+N; the launcher reads it
    back as the signal, as for an unwrapped worker."""
    monkeypatch.setenv("INFERCHECK_DEVICE", "cpu")
    script = tmp_path / "fake-python"
    script.write_text("#!/bin/bash\nkill -SEGV $$\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    run = launch(job(), EngineEnv("patched", "overlay", str(script), "t" * 40), tmp_path / "w", timeout_s=60)
    assert not run.ok and run.error_kind == "crash" and run.error.startswith("killed by SIGSEGV"), run.error
    own = Containment(None, None, "isolated", (), (), own_pids=True)
    assert [worker_status(s, own) for s in (0, 1, 139, 143, None)] == [0, 1, -11, -15, None]
    assert worker_status(139, Containment(None, None, "isolated", (), ())) == 139


def test_worker_memory_setting_must_be_a_positive_number(monkeypatch):
    from infercheck.errors import InfercheckError
    from infercheck.run.sandbox import MEMORY_ENV, memory_limit

    monkeypatch.setenv(MEMORY_ENV, "8")
    assert memory_limit("cpu") == 8 * 1024**3
    assert memory_limit("cuda") is None
    for bad in ("lots", "-1", "0", "nan", "inf"):
        monkeypatch.setenv(MEMORY_ENV, bad)
        with pytest.raises(InfercheckError, match=MEMORY_ENV):
            memory_limit("cpu")
