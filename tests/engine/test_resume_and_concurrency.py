"""Reliability of whole runs: a harness killed with SIGKILL mid-run leaves no worker running and
resumes without redoing finished work, with the verdict an uninterrupted run gives; SIGTERM ends a
run as Ctrl-C does (workers stopped, exit 143, the folder resumable); two validates at once share
one cache."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infercheck.cases import load_case
from infercheck.paths import PATCHES_DIR
from infercheck.run.job import read_jsonl
from infercheck.run.ray_pool import RAY_TASK
from tests.conftest import TEST_SEED, cli_env, gone_within, ray_or_skip, skip_where_ray_cannot_start

pytestmark = pytest.mark.engine

CASE = load_case(PATCHES_DIR / "rotary-half-precision-cache")


def validate_cmd(candidate: str | list[str], out: Path, apps: str = "none") -> list[str]:
    names = [candidate] if isinstance(candidate, str) else candidate
    patches = [str(next(c.patch for c in CASE.candidates if c.name == name)) for name in names]
    return [sys.executable, "-m", "infercheck.cli", "validate", *patches, "--case", str(CASE.folder),
            "--out", str(out), "--apps", apps, "--suites", "parity/addition-short", "--seed", str(TEST_SEED),
            "--no-floor"]  # what these tests judge is how a run ends and resumes, not its tolerances


def headline(out: Path) -> str:
    return json.loads((out / "verdict.json").read_text())["headline"]


def test_a_harness_killed_mid_run_resumes_without_redoing_finished_work(tmp_path):
    env = cli_env(tmp_path / "cache")
    out = tmp_path / "run"
    # one app besides the main group: the worker has several groups, so the kill lands between them
    harness = subprocess.Popen(validate_cmd("root-float32-table", out, apps="stop-and-n"), env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.time() + 600
    while not read_jsonl(out / "runs" / "base" / "groups.jsonl") and time.time() < deadline:
        assert harness.poll() is None, "the run ended before it could be interrupted"
        time.sleep(0.5)
    worker = int((out / "runs" / "base" / "worker.pid").read_text().split()[0])
    os.kill(harness.pid, signal.SIGKILL)  # the harness only: nothing of it can clean up
    harness.wait()
    assert gone_within(worker, 10.0), "the worker outlived its SIGKILLed harness"  # its lifeline broke
    finished = [g["name"] for g in read_jsonl(out / "runs" / "base" / "groups.jsonl")]
    assert finished and not (out / "verdict.json").exists()

    proc = subprocess.run([sys.executable, "-m", "infercheck.cli", "validate", "--resume", str(out)],
                          capture_output=True, text=True, env=env, timeout=1200)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 0 and headline(out) == "RESOLVED", proc.stderr[-3000:]
    assert "run base: ok" in proc.stderr and "reused from cache" in proc.stderr.split("run base:")[1].splitlines()[0]
    groups = [g["name"] for g in read_jsonl(out / "runs" / "base" / "groups.jsonl")]
    assert sorted(groups) == sorted(set(groups))  # every group once, finished ones not run twice
    reused = (out / "runs" / "base" / "reused-from").read_text()
    assert all(name in reused for name in finished)
    assert not (out / "runs" / "base" / "worker.pid").exists()


def test_sigterm_stops_the_workers_and_leaves_the_run_resumable(tmp_path):
    env = cli_env(tmp_path / "cache")
    out = tmp_path / "run"
    harness = subprocess.Popen(validate_cmd("root-float32-table", out), env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    pid_file = out / "runs" / "base" / "worker.pid"
    deadline = time.time() + 300
    while not (pid_file.is_file() and pid_file.read_text().strip()) and time.time() < deadline:
        assert harness.poll() is None, "the run ended before it could be cancelled"
        time.sleep(0.2)
    worker = int(pid_file.read_text().split()[0])
    harness.send_signal(signal.SIGTERM)  # what a CI runner's cancel sends
    _, err = harness.communicate(timeout=60)
    assert harness.returncode == 143 and "Traceback" not in err, err[-3000:]
    assert err.strip().splitlines()[-1].startswith("infercheck: SIGTERM after"), err[-3000:]
    assert gone_within(worker, 5.0) and not pid_file.exists()
    assert (out / "inputs" / "options.json").is_file() and not (out / "verdict.json").exists()  # --resume finishes it


@pytest.fixture(scope="module")
def two_at_once(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    """Two candidates validated by two harnesses at once in one fresh cache: (cache, run folders)."""
    root = tmp_path_factory.mktemp("two-at-once")
    env = cli_env(root / "cache")
    runs = {name: root / name for name in ("root-float32-table", "native-path-rebuild")}
    procs = {name: subprocess.Popen(validate_cmd(name, out), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True) for name, out in runs.items()}
    for name, proc in procs.items():
        _, err = proc.communicate(timeout=1800)
        assert "Traceback" not in err, err[-3000:]
    return root / "cache", runs


def test_two_validates_at_once_share_the_cache(two_at_once, tmp_path):
    cache, runs = two_at_once
    assert headline(runs["root-float32-table"]) == "RESOLVED"
    assert headline(runs["native-path-rebuild"]) == "NOT_FIXED"
    entries = list((cache / "groups").iterdir())
    assert entries and not [e for e in entries if e.name.startswith(".tmp-")]
    for entry in entries:  # every entry whole and readable
        rows = [json.loads(line) for line in (entry / "groups.jsonl").read_text().splitlines()]
        assert len(rows) == 1 and not rows[0].get("error")
        assert all(json.loads(line) for line in (entry / "results.jsonl").read_text().splitlines())
    # a third run finds everything of the base in the cache
    again = subprocess.run(validate_cmd("root-float32-table", tmp_path / "again"), capture_output=True, text=True,
                           env=cli_env(cache), timeout=1800)
    assert headline(tmp_path / "again") == "RESOLVED" and "reused from cache" in again.stderr


def judged(run: Path) -> dict[str, tuple]:
    """Each check of a run as (base passed, patched passed, base value, patched value)."""
    checks = json.loads((run / "results.json").read_text())["checks"]
    return {c["name"]: tuple((c.get(v) or {}).get(k) for v in ("base", "patched") for k in ("passed", "value"))
            for c in checks}


def test_candidates_as_ray_tasks_get_the_serial_verdicts_and_values(two_at_once, tmp_path):
    """Both candidates at once under a local Ray (2 CPUs, a fresh cache): every engine and
    reference worker a Ray task, each candidate's verdict and every check's values the serial runs'."""
    ray_or_skip()
    _, serial = two_at_once
    out = tmp_path / "ray"
    proc = subprocess.run([*validate_cmd(list(serial), out), "--ray"], capture_output=True, text=True,
                          env=cli_env(tmp_path / "cache"), timeout=1800)
    skip_where_ray_cannot_start(proc.stderr)
    assert "Traceback" not in proc.stderr and proc.returncode in (0, 1), proc.stderr[-3000:]
    listed = json.loads((out / "candidates.json").read_text())["candidates"]
    folders = {Path(c["patch"]).stem: out / c["report"] for c in listed}
    assert set(folders) == set(serial)
    for name, folder in folders.items():
        assert headline(folder) == headline(serial[name]), name
        assert judged(folder) == judged(serial[name]), name
        tasks = [json.loads(p.read_text()) for p in (folder / "runs").glob(f"*/{RAY_TASK}")]
        assert tasks and all(t["node"] and t["task"] for t in tasks)  # the workers that ran were Ray tasks
