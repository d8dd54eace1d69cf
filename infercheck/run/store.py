"""The stored results of a run (docs/design.md, "State"): what the run stage leaves in
`<run>/runs/` and the grade stage reads back, so grading needs no engine and `regrade` can redo it.

`runs/outcome.json` records how every worker ended (and a build error, and the pytest symptom's
outcome per variant); each worker folder holds its rows (results.jsonl, groups.jsonl,
lm_eval.jsonl). `load_stored` reads the whole folder into one StoredRun.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from infercheck.errors import InfercheckError
from infercheck.run.job import (GROUPS, JOB_FILE, LM_EVAL, RESULTS, SOURCES, TIMING, TRACE, GroupResult, Job,
                                RequestResult, WorkerTiming, read_jsonl)

OUTCOME = "outcome.json"
REFERENCE_EVAL = "reference-eval"


def pytest_folder(variant: str) -> str:
    """Where the pytest symptom's run in one variant's env leaves its log (and, traced, its lines)."""
    return f"pytest-{variant}"


def reference_worker(variant: str) -> str:
    """The worker that re-scores one engine variant's outputs."""
    return f"reference-{variant}"


@dataclass
class PytestOutcome:
    passed: bool
    returncode: int | None
    tail: str = ""
    wall_s: float = 0.0  # the harness's time on it in this run (0 in runs recorded before it was kept)
    reused: bool = False  # its outcome came from the cache


@dataclass
class WorkerOutcome:
    ok: bool
    error_kind: str | None = None  # bad_engine_arg | exception | crash | timeout | ...
    error: str | None = None
    elapsed_s: float = 0.0  # the worker subprocess, as the launcher saw it (0: every group reused, none ran)
    reused_groups: int = 0
    wall_s: float = 0.0  # the harness's whole time on it: cache look-up, the subprocess, cached rows joined


@dataclass
class RunOutcome:
    """How the run stage ended: worker name -> outcome, in the order they ran."""

    workers: dict[str, WorkerOutcome] = field(default_factory=dict)
    build_error: str | None = None  # the patched variant did not build: no worker ran
    pytest: dict[str, PytestOutcome] = field(default_factory=dict)  # variant -> the pytest symptom

    def save(self, runs_dir: Path) -> None:
        runs_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=runs_dir, prefix=f".{OUTCOME}.", suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            json.dump(asdict(self), fh, indent=1)
        os.replace(tmp, runs_dir / OUTCOME)

    @classmethod
    def load(cls, runs_dir: Path) -> "RunOutcome":
        path = runs_dir / OUTCOME
        try:
            data = json.loads(path.read_text())
            return cls({k: WorkerOutcome(**v) for k, v in data.get("workers", {}).items()}, data.get("build_error"),
                       {k: PytestOutcome(**v) for k, v in data.get("pytest", {}).items()})
        except FileNotFoundError:
            raise InfercheckError(f"no {OUTCOME} in {runs_dir}: the run stage did not finish "
                                  f"(finish it with `infercheck validate --resume`)") from None
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            raise InfercheckError(f"cannot read {path}: {type(exc).__name__}: {exc}".splitlines()[0]) from None


@dataclass
class WorkerRows:
    """One worker folder's rows."""

    results: list[RequestResult] = field(default_factory=list)
    groups: list[GroupResult] = field(default_factory=list)
    lm_eval: list[dict[str, Any]] = field(default_factory=list)
    trace: dict[str, dict[str, list[int]]] | None = None  # group -> file -> executed lines; None: not traced
    sources: dict[str, str | None] = field(default_factory=dict)  # traced file -> its text as run
    job: Job | None = None  # the job the worker ran (job.json), None where none was written
    timing: WorkerTiming | None = None  # the worker's own clock (timing.json), None where no worker ran

    def finished_groups(self) -> set[str]:
        return {g.name for g in self.groups if not g.error}


def read_rows(folder: Path) -> WorkerRows:
    return WorkerRows([RequestResult.from_dict(r) for r in read_jsonl(folder / RESULTS)],
                      [GroupResult(**g) for g in read_jsonl(folder / GROUPS)], read_jsonl(folder / LM_EVAL),
                      read_json_file(folder / TRACE), read_json_file(folder / SOURCES) or {}, read_job(folder),
                      read_timing(folder))


def read_timing(folder: Path) -> WorkerTiming | None:
    data = read_json_file(folder / TIMING)
    return WorkerTiming.from_dict(data) if data is not None else None


def read_job(folder: Path) -> Job | None:
    try:
        return Job.load(folder / JOB_FILE) if (folder / JOB_FILE).is_file() else None
    except (InfercheckError, KeyError, TypeError, ValueError):
        return None


def read_json_file(path: Path) -> dict[str, Any] | None:
    """A JSON object written by a worker or the cache; None when absent or unreadable."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@dataclass
class StoredRun:
    outcome: RunOutcome
    rows: dict[str, WorkerRows]  # worker name -> its rows

    def of(self, worker: str) -> WorkerRows:
        return self.rows.get(worker) or WorkerRows()


def load_stored(runs_dir: Path) -> StoredRun:
    """Everything the grade stage reads, from a run's `runs/` folder."""
    outcome = RunOutcome.load(runs_dir)
    folders = [*outcome.workers, *(pytest_folder(v) for v in outcome.pytest)]
    return StoredRun(outcome, {name: read_rows(runs_dir / name) for name in folders})
