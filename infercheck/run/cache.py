"""Reuse of finished worker results across runs, one engine group at a time (e.g. the base and
reference groups shared by every candidate of a case, whatever apps each candidate adds).

A group's entry is keyed by the content that determines it: the group (requests, engine args,
model override, lm-eval task settings), the job's backend, model, dtype and seed, the engine tree
hash, the model files, the suite data, the worker code and the files the job traces. Only the groups
without an entry run;
the worker's rows and the cached rows end up together in the run folder. Entries are written to a
temp folder and renamed into place, so a crashed or concurrent run never leaves half an entry.

A pytest symptom's run is reused the same way (`run_pytest_cached`): keyed by the test's folder, the
node id, the engine env, the traced files and the code that runs it; only an outcome the test
itself decided (passed, or tests failed) is stored, never a timeout, an error or a crash.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import asdict, replace
from pathlib import Path

from infercheck.build.engine_env import EngineEnv
from infercheck.paths import DATA_DIR, SUITES_DIR, cache_dir
from infercheck.run.job import (GROUPS, JOB_DIGESTS, JOB_FILE, LM_EVAL, RESULTS, SOURCES, STATUS, TIMING, TRACE, Group,
                                Job, read_jsonl)
from infercheck.run.launcher import REUSED_FROM, Launcher, Watch, WorkerRun, classify, launch, stop_orphan
from infercheck.run.pytest_runner import run_pytest
from infercheck.run.slots import Placement, unplaced
from infercheck.run.store import PytestOutcome, read_json_file
from infercheck.specs import SymptomSpec

RUN_DIR = Path(__file__).resolve().parent
# The code a worker subprocess runs: what its rows depend on (the harness-side modules of run/ do not).
WORKER_CODE = (*(RUN_DIR / f"{m}.py" for m in ("worker", "job", "vllm_backend", "hf_backend", "lm_eval_runner")),
               RUN_DIR.parent / "errors.py")
# The code a pytest symptom runs under (run/traced_pytest.py and what it imports).
PYTEST_CODE = (*(RUN_DIR / f"{m}.py" for m in ("traced_pytest", "pytest_entry", "worker", "lifeline", "job",
                                                "pytest_runner")),)
PYTEST_DECIDED = (0, 1)  # pytest's exit codes for "passed" and "tests failed": what the test said
ENTRY_OUTCOME = "outcome.json"  # in a pytest cache entry: how the decided run ended
ROW_FILES = (RESULTS, GROUPS, LM_EVAL)
NARROWED = "trace.narrowed"  # beside a TRACE the harness narrowed to the patch's files (not a worker's)
ENGINE = "engine.json"  # which engine env wrote a worker folder (a resume harvests only its own)


def digest_files(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for path in sorted(paths):
        h.update(str(path.name).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def group_key(job: Job, group: Group, env: EngineEnv) -> str:
    data = asdict(group)
    for task in data["lm_eval"]:
        task["include_path"] = "staged"  # the staged copy lives in each run folder
    model = Path(group.model or job.model)
    parts = {
        "job": [job.backend, job.model if group.model is None else None, job.dtype, job.seed, sorted(job.trace)],
        "group": data,
        "engine": engine_identity(env),
        "model": digest_files([p for p in model.iterdir() if p.is_file()]) if model.is_dir() else str(model),
        "suite_data": digest_files([p for p in (SUITES_DIR / "accuracy" / "tasks").glob("*.yaml")]
                                   + [p for p in DATA_DIR.rglob("*.jsonl")]),
        "worker_code": digest_files(list(WORKER_CODE)),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]


def engine_identity(env: EngineEnv) -> list:
    """What names an engine env in a cache key: the tree, the interpreter, for the installed engine
    where its packages are, and the variables it runs under."""
    return [env.strategy, env.tree_hash, env.python, list(env.pythonpath) if env.strategy == "installed" else [],
            sorted(env.env.items())]


def pytest_key(spec: SymptomSpec, env: EngineEnv, trace: list[str]) -> str:
    """A pytest symptom run's cache key: every file of the folder its test file is in (the test, its
    data, a conftest beside it), the node id, the engine env, the traced files and PYTEST_CODE. A
    test that reads files elsewhere (a model folder) is keyed by its own folder only."""
    folder = (Path(spec.path).parent / str(spec.pytest).split("::", 1)[0]).parent
    files = sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    parts = {"node": str(spec.pytest), "folder": {str(p.relative_to(folder)): digest_files([p]) for p in files},
             "engine": engine_identity(env), "trace": sorted(trace), "code": digest_files(list(PYTEST_CODE))}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:24]


def reuse_entry(entry: Path, out_dir: Path) -> dict | None:
    """A decided run's stored outcome (ENTRY_OUTCOME), its files copied into out_dir; None when the
    cache holds no such run."""
    stored = read_json_file(entry / ENTRY_OUTCOME)
    if stored is None:
        return None
    out_dir.mkdir(parents=True, exist_ok=True)
    for path in entry.iterdir():
        if path.name != ENTRY_OUTCOME:
            shutil.copyfile(path, out_dir / path.name)
    (out_dir / REUSED_FROM).write_text(f"{entry}\n")
    return stored


def store_entry(entry: Path, out_dir: Path, outcome: dict) -> None:
    """Keep a decided run's files (out_dir's) and its outcome as the cache entry, atomically."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=entry.parent, prefix=".tmp-"))
    for path in out_dir.iterdir():
        if path.is_file() and path.name != REUSED_FROM:
            shutil.copyfile(path, tmp / path.name)
    (tmp / ENTRY_OUTCOME).write_text(json.dumps(outcome))
    try:
        os.replace(tmp, entry)
    except OSError:  # another run stored the same entry first
        shutil.rmtree(tmp, ignore_errors=True)


def run_pytest_cached(spec: SymptomSpec, env: EngineEnv, out_dir: Path, timeout_s: float, trace: list[str],
                      reuse: bool = True, place: Placement = unplaced) -> tuple[PytestOutcome, bool]:
    """The symptom's pytest run in `env` (run/pytest_runner.py) where `place` puts it, or its stored
    outcome and files (pytest.log, the trace) when the same run finished before. Returns (outcome, reused)."""
    entry = cache_dir() / "pytest" / pytest_key(spec, env, trace)
    stored = reuse_entry(entry, out_dir) if reuse else None
    if stored is not None:
        return PytestOutcome(**stored), True
    (out_dir / REUSED_FROM).unlink(missing_ok=True)
    for stale in (TRACE, SOURCES):  # a trace left by an earlier run in this folder is not this run's
        (out_dir / stale).unlink(missing_ok=True)
    with place(env) as placed:
        outcome = run_pytest(spec, placed, out_dir, timeout_s, trace)
    if outcome.returncode in PYTEST_DECIDED and (not trace or (out_dir / TRACE).is_file()):
        store_entry(entry, out_dir, asdict(outcome))
    return outcome, False


def rows_by_group(folder: Path) -> dict[str, dict[str, list[dict]]]:
    """A worker folder's rows, read once: file name -> group name -> rows."""
    out: dict[str, dict[str, list[dict]]] = {}
    for name in ROW_FILES:
        key = "name" if name == GROUPS else "group"
        for row in read_jsonl(folder / name):
            out.setdefault(name, {}).setdefault(row.get(key), []).append(row)
    return out


def finished(rows: dict[str, dict[str, list[dict]]], group: str) -> bool:
    return bool(rows.get(GROUPS, {}).get(group))


def entry_files(job: Job) -> tuple[str, ...]:
    """What a complete cache entry of one of the job's groups holds."""
    return (*ROW_FILES, TRACE) if job.trace else ROW_FILES


def store_group(rows: dict[str, dict[str, list[dict]]], group: str, entry: Path,
                trace: dict[str, dict[str, list[int]]] | None = None) -> None:
    """Copy one finished group's rows (rows_by_group of its run folder) into its cache entry,
    atomically; for a traced job (trace: its run folder's TRACE, None where the worker saved none)
    the group's executed lines too."""
    summary = rows.get(GROUPS, {}).get(group)
    if not summary or summary[0].get("error"):  # failures are not cached: a rerun may tell more
        return
    entry.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=entry.parent, prefix=".tmp-"))
    for name in ROW_FILES:
        (tmp / name).write_text("".join(json.dumps(r) + "\n" for r in rows.get(name, {}).get(group, [])))
    if trace is not None:
        (tmp / TRACE).write_text(json.dumps(trace.get(group, {})))
    try:
        os.replace(tmp, entry)
    except OSError:  # another run stored the same entry first
        shutil.rmtree(tmp, ignore_errors=True)


def store_groups(job: Job, out_dir: Path, entries: dict[str, Path], names: list[str]) -> None:
    """store_group for each of `names` that finished in out_dir; a traced worker killed before it
    saved its lines stores nothing (its groups cannot say what ran)."""
    trace = None
    if job.trace:
        trace = None if (out_dir / NARROWED).exists() else read_json_file(out_dir / TRACE)
        if trace is None:
            return
    rows = rows_by_group(out_dir)
    for name in names:
        store_group(rows, name, entries[name], trace)


def append_group(entry: Path, out_dir: Path) -> None:
    """A cache entry's rows added to a run folder, its group row marked reused: its times are the
    run's that computed it (docs/design.md, "Where the time goes")."""
    for name in ROW_FILES:
        text = (entry / name).read_text() if name != GROUPS else \
            "".join(json.dumps({**row, "reused": True}) + "\n" for row in read_jsonl(entry / GROUPS))
        with (out_dir / name).open("a") as rows:
            rows.write(text)


def keep_traced(job: Job, env: EngineEnv, entries: dict[str, Path], out_dir: Path) -> None:
    """The run folder's TRACE: its own groups' lines and the cached groups' (group name -> entry),
    narrowed to the job's `sources` (the patch's files: what grading reads; the cache keeps the
    whole package's lines); SOURCES: those files' text in this env, read here, not by the worker."""
    lines = read_json_file(out_dir / TRACE) or {}
    lines.update({group: read_json_file(entry / TRACE) or {} for group, entry in entries.items()})
    wanted = set(job.sources)
    narrowed = {group: {f: ls for f, ls in files.items() if f in wanted} for group, files in lines.items()}
    (out_dir / NARROWED).touch()  # before the narrowed lines: a resume never stores them as a group's
    write_json_atomic(out_dir / TRACE, narrowed)
    write_json_atomic(out_dir / SOURCES, engine_sources(env, job.sources))


def write_json_atomic(path: Path, payload: object) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(payload))
    tmp.replace(path)


def engine_sources(env: EngineEnv, files: list[str]) -> dict[str, str | None]:
    """{file: its text where env's interpreter imports the engine from, None where that tree lacks it}
    for each engine-relative file ("vllm/x.py"); {} where the engine cannot be found."""
    files = [f for f in files if not Path(f).is_absolute()]
    if not files:
        return {}
    root = engine_root(env)
    if root is None:
        return {f: None for f in files}
    return {f: (root / f).read_text() if (root / f).is_file() else None for f in files}


def engine_root(env: EngineEnv) -> Path | None:
    """The folder env's interpreter imports the engine package from (an overlay's, a venv's), asked
    of that interpreter without importing the engine."""
    probe = ("import importlib.util as u; s = u.find_spec('vllm'); "
             "print(list(s.submodule_search_locations)[0] if s and s.submodule_search_locations else '')")
    try:
        found = subprocess.run([env.python, "-c", probe], env=env.environ(), capture_output=True, text=True,
                               timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(found).resolve().parent if found else None


def engine_record(env: EngineEnv) -> dict[str, str]:
    """Which engine env wrote a worker folder, naming no path (the worker can read its folder)."""
    return {"strategy": env.strategy, "tree_hash": env.tree_hash,
            "python": hashlib.sha256(env.python.encode()).hexdigest()[:16]}


def harvest(out_dir: Path, job: Job, entries: dict[str, Path], env: EngineEnv) -> None:
    """Store the groups a previous, interrupted run into out_dir finished (the same group content,
    per the digests of the job it launched), so a resumed run does not redo them."""
    stop_orphan(out_dir)  # a worker of the killed run must not write while rows are read
    try:
        previous = json.loads((out_dir / JOB_DIGESTS).read_text())
        engine = json.loads((out_dir / ENGINE).read_text())
    except (OSError, ValueError):
        return
    wanted = job.digests()
    if engine != engine_record(env) or previous.get("settings") != wanted["settings"]:
        return  # another engine or model wrote this folder: its rows say nothing about this run
    rows = rows_by_group(out_dir)
    names = [name for name, digest in (previous.get("groups") or {}).items()
             if wanted["groups"].get(name) == digest and not (entries[name] / GROUPS).is_file() and finished(rows, name)]
    store_groups(job, out_dir, entries, names)


def launch_cached(job: Job, env: EngineEnv, out_dir: Path, timeout_s: float, reuse: bool = True,
                  watch: Watch | None = None, place: Placement = unplaced,
                  launcher: Launcher = launch) -> tuple[WorkerRun, int]:
    """Run the job's groups that have no cache entry (in a worker where `place` puts it, started by
    `launcher`: here, or as a Ray task), then add the cached ones' rows. Returns (run, number of
    groups reused)."""
    root = cache_dir() / "groups"
    entries = {g.name: root / group_key(job, g, env) for g in job.groups}
    harvest(out_dir, job, entries, env)
    cached = [g for g in job.groups if reuse and all((entries[g.name] / n).is_file() for n in entry_files(job))]
    todo = [g for g in job.groups if g not in cached]
    if todo:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / ENGINE).write_text(json.dumps(engine_record(env)))
        for stale in (TRACE, SOURCES, NARROWED):  # what a worker saves of what ran is its own
            (out_dir / stale).unlink(missing_ok=True)
        with place(env) as placed:
            run = launcher(replace(job, groups=todo), placed, out_dir, timeout_s, watch)
        store_groups(job, out_dir, entries, [g.name for g in todo])
    else:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name in (*ROW_FILES, STATUS, TRACE, SOURCES, NARROWED, TIMING):  # no worker ran: no worker's clock either
            (out_dir / name).unlink(missing_ok=True)
        (out_dir / STATUS).write_text(json.dumps({"state": "done", "reused": True}))
        run = classify(env.name, out_dir, 0, 0.0, timeout_s)
    for group in cached:
        append_group(entries[group.name], out_dir)
    if job.trace:
        keep_traced(job, env, {g.name: entries[g.name] for g in cached}, out_dir)
    (out_dir / JOB_FILE).write_text(job.to_json())
    if cached:
        (out_dir / REUSED_FROM).write_text("".join(f"{g.name} {entries[g.name]}\n" for g in cached))
    return run, len(cached)
