"""The stored results of a run (docs/design.md, "State"): what the run stage leaves in
`<run>/runs/` and the grade stage reads back, so grading needs no engine and `regrade` can redo it.

`runs/outcome.json` records how every worker ended (and a build error, and the pytest symptom's
outcome per variant); each worker folder holds its rows (results.jsonl, groups.jsonl,
lm_eval.jsonl). `load_stored` reads the whole folder into one StoredRun.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import xml.etree.ElementTree as ElementTree
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from infercheck.errors import InfercheckError
from infercheck.engine_test_selection import EngineTestSelection
from infercheck.names import EngineTestStatus
from infercheck.run.job import (GROUPS, JOB_FILE, LM_EVAL, RESULTS, SOURCES, TIMING, TRACE, GroupResult, Job,
                                RequestResult, WorkerTiming, read_jsonl)

OUTCOME = "outcome.json"
REFERENCE_EVAL = "reference-eval"
ENGINE_TESTS_JUNIT = "junit.xml"  # pytest's per-test report in an engine-tests folder (run/pytest_runner.py JUNIT)
ENGINE_TEST_SELECTION = "engine-tests.json"  # in runs/: the engine tests selected, and why (engine_test_selection.py)


def atomic_write(path: Path, text: str) -> None:
    """UTF-8 text via a temp file in the same folder + os.replace: readers see the old file or the
    new one, never half of one. Mode 0644 (mkstemp's 0600 would hide reports from a web server)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


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


UNMODIFIED = "unmodified"  # the engine tree without base patches or candidate: which engine tests run here
FLOOR = "floor"  # the unmodified engine's noise-floor run of the parity workloads (plan.floor_job)


def engine_tests_folder(env_label: str) -> str:
    """Where the engine's own tests run in one engine env (unmodified, base, patched) leave their report."""
    return f"engine-tests-{env_label}"


@dataclass
class EngineTestRun:
    """How one engine env's run of the selected engine tests ended; its per-test outcomes are the
    junit report beside it (`parse_junit`)."""

    returncode: int | None
    elapsed_s: float = 0.0
    error: str | None = None  # why it has no per-test outcome (timed out, pytest wrote no report)
    reused: bool = False


@dataclass(frozen=True)
class EngineTestOutcome:
    """One engine test's outcome in one engine env."""

    test: str  # pytest node id, "tests/v1/core/test_x.py::test_y[param]"
    status: EngineTestStatus
    message: str = ""  # the first line of the failure, error or skip message


def node_id(case: ElementTree.Element) -> str:
    """A junit testcase's pytest node id (xunit1 keeps the file; a collection error names the module)."""
    file, classname, name = case.get("file") or "", case.get("classname") or "", case.get("name") or ""
    if not file:
        return f"{classname}::{name}" if classname else name
    module = file.removesuffix(".py").replace("/", ".")
    owner = classname[len(module) + 1:].replace(".", "::") if classname.startswith(module + ".") else ""
    return "::".join(p for p in (file, owner, name) if p)


JUNIT_STATUSES = (("failure", EngineTestStatus.FAILED), ("error", EngineTestStatus.ERROR),
                  ("skipped", EngineTestStatus.SKIPPED))  # a testcase's child element -> its status


def parse_junit(text: str) -> list[EngineTestOutcome]:
    """pytest's junit XML report as per-test outcomes (pure); a report that does not parse is no outcomes."""
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError:
        return []
    out = []
    for case in root.iter("testcase"):
        status, message = EngineTestStatus.PASSED, ""
        for child, word in JUNIT_STATUSES:
            found = case.find(child)
            if found is not None:
                status, message = word, (found.get("message") or found.text or "").strip().split("\n")[0][:300]
                break
        out.append(EngineTestOutcome(node_id(case), status, message))
    return out


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
    engine_tests: dict[str, EngineTestRun] = field(default_factory=dict)  # unmodified/base/patched -> its run
    engine_tests_note: str | None = None  # why the engine's own tests did not run (no test tree, none selected)

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
                       {k: PytestOutcome(**v) for k, v in data.get("pytest", {}).items()},
                       {k: EngineTestRun(**v) for k, v in data.get("engine_tests", {}).items()},
                       data.get("engine_tests_note"))
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
    engine_tests: dict[str, list[EngineTestOutcome]] = field(default_factory=dict)  # env label -> per-test outcomes
    engine_test_selection: EngineTestSelection | None = None  # runs/engine-tests.json: the selection, and why

    def of(self, worker: str) -> WorkerRows:
        return self.rows.get(worker) or WorkerRows()


def read_engine_tests(folder: Path) -> list[EngineTestOutcome]:
    try:
        return parse_junit((folder / ENGINE_TESTS_JUNIT).read_text(errors="replace"))
    except OSError:
        return []


def load_stored(runs_dir: Path) -> StoredRun:
    """Everything the grade stage reads, from a run's `runs/` folder."""
    outcome = RunOutcome.load(runs_dir)
    folders = [*outcome.workers, *(pytest_folder(v) for v in outcome.pytest)]
    tests = {label: read_engine_tests(runs_dir / engine_tests_folder(label)) for label in outcome.engine_tests}
    return StoredRun(outcome, {name: read_rows(runs_dir / name) for name in folders}, tests,
                     read_selection(runs_dir / ENGINE_TEST_SELECTION))


def read_selection(path: Path) -> EngineTestSelection | None:
    """The engine tests a run selected; None where it recorded none (a run from before engine tests)."""
    try:
        return EngineTestSelection.from_json(path.read_text())
    except (OSError, ValueError, KeyError, TypeError):
        return None
