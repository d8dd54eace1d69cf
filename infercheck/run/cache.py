"""Reuse of finished worker results across runs (e.g. the base and reference of a case's candidates).

A result is keyed by the content that determines it: the job (requests, engine args, lm-eval task
settings), the engine tree hash, the model files, the suite data and the worker code. Entries are
written to a temp folder and renamed into place, so a crashed run never leaves half an entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

from infercheck.build.engine_env import EngineEnv
from infercheck.paths import DATA_DIR, SUITES_DIR, cache_dir
from infercheck.run.job import GROUPS, LM_EVAL, RESULTS, STATUS, Job
from infercheck.run.launcher import WorkerRun, classify, launch

RUN_DIR = Path(__file__).resolve().parent
CACHED_FILES = (RESULTS, GROUPS, LM_EVAL, STATUS)


def digest_files(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for path in sorted(paths):
        h.update(str(path.name).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def result_key(job: Job, env: EngineEnv) -> str:
    data = asdict(job)
    for group in data["groups"]:
        for task in group["lm_eval"]:
            task["include_path"] = "staged"  # the staged copy lives in each run folder
    model = Path(job.model)
    parts = {
        "job": data,
        "engine": [env.strategy, env.tree_hash, env.python, list(env.pythonpath) if env.strategy == "installed" else []],
        "model": digest_files([p for p in model.iterdir() if p.is_file()]) if model.is_dir() else job.model,
        "suite_data": digest_files([p for p in (SUITES_DIR / "accuracy" / "tasks").glob("*.yaml")]
                                   + [p for p in DATA_DIR.rglob("*.jsonl")]),
        "worker_code": digest_files(list(RUN_DIR.glob("*.py"))),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]


def launch_cached(job: Job, env: EngineEnv, out_dir: Path, timeout_s: float, reuse: bool = True) -> tuple[WorkerRun, bool]:
    """Launch, or copy a finished identical run from the cache. Returns (run, reused)."""
    entry = cache_dir() / "results" / result_key(job, env)
    if reuse and (entry / STATUS).is_file():
        out_dir.mkdir(parents=True, exist_ok=True)
        for name in CACHED_FILES:
            if (entry / name).is_file():
                shutil.copyfile(entry / name, out_dir / name)
        (out_dir / "job.json").write_text(job.to_json())
        (out_dir / "reused-from").write_text(str(entry) + "\n")
        return classify(env.name, out_dir, 0, 0.0, timeout_s), True
    run = launch(job, env, out_dir, timeout_s)
    if run.ok:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=entry.parent, prefix=".tmp-"))
        for name in CACHED_FILES:
            if (out_dir / name).is_file():
                shutil.copyfile(out_dir / name, tmp / name)
        try:
            os.replace(tmp, entry)
        except OSError:  # another run stored the same entry first
            shutil.rmtree(tmp, ignore_errors=True)
    return run, False
