"""Worker subprocess: `python -m infercheck.run.worker --job JOB --out DIR` (or `--probe`).

Runs one variant's job with one engine instance per group, streaming one JSON line per request to
DIR/results.jsonl and one per group to DIR/groups.jsonl. DIR/status.json ends as
{"state": "done"} or {"state": "error", "kind": ..., "message": ...}; a worker that dies without
writing it was killed (crash, hang, out of memory) and the launcher says so.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from infercheck.errors import InfercheckError
from infercheck.run.lifeline import watch_harness
from infercheck.run.job import (GROUPS, LM_EVAL, RESULTS, SOURCES, STATUS, TIMING, TRACE, Group, GroupResult, Job,
                                RequestResult, Sink, WorkerInputError, WorkerTiming)
from infercheck.run.progress import ProgressWriter

EXIT_HANDLED_ERROR = 3


def probe() -> dict[str, Any]:
    """Versions and device as this variant's interpreter sees them."""
    info: dict[str, Any] = {"python": sys.version.split()[0]}
    for module in ("vllm", "torch", "transformers", "lm_eval"):
        try:
            mod = __import__(module)
            info[module] = getattr(mod, "__version__", "unknown")
            info[f"{module}_path"] = str(Path(mod.__file__).parent)
        except Exception as exc:  # report, never crash the probe
            info[module] = f"unavailable ({type(exc).__name__}: {exc})"
    try:
        import torch

        info["cuda_available"] = bool(torch.cuda.is_available())
        info["device_name"] = torch.cuda.get_device_name(0) if info["cuda_available"] else "cpu"
    except Exception:
        info["cuda_available"] = False
    return info


def write_status(out: Path, **status: Any) -> None:
    tmp = out / (STATUS + ".tmp")
    tmp.write_text(json.dumps(status))
    tmp.replace(out / STATUS)


def seconds_since_exec() -> float:
    """How long this process has been running: /proc's start time (clock ticks after boot) against
    the boot clock; 0 where /proc cannot say."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[-1].split()[19])
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0


def write_timing(out: Path, booted: float, started: float) -> None:
    """The worker's own clock (WorkerTiming): interpreter start, its main() and now."""
    timing = WorkerTiming(round(booted, 3), round(started - booted, 3), round(time.time() - booted, 3))
    try:
        (out / TIMING).write_text(json.dumps(asdict(timing)))
    except OSError:  # timings are evidence, never a reason to lose the job's results
        pass


MEMORY_MESSAGE = ("an allocation was refused under the worker's address-space limit "
                  "(INFERCHECK_WORKER_MEMORY_GB; see containment.json)")


def one_line(exc: BaseException) -> str:
    """An exception as one line: a multi-line message (pydantic's, say) keeps its lines, joined; a
    bare MemoryError says where the limit comes from."""
    text = str(exc) or (MEMORY_MESSAGE if isinstance(exc, MemoryError) else "")
    lines = [line.strip() for line in f"{type(exc).__name__}: {text}".splitlines() if line.strip()]
    text = " | ".join(lines)
    return text if len(text) <= 500 else text[:497] + "..."


def run_isolated(backend: Any, job: Job, group: Group, sink: Sink) -> GroupResult:
    """Run an isolated group; its failure becomes GroupResult.error (trace to stderr) and the job goes on.
    Bad input (WorkerInputError) still ends the job: that is the harness's or the user's mistake."""
    try:
        return backend.run_group(job, group, sink)
    except WorkerInputError:
        raise
    except Exception as exc:
        traceback.print_exc()
        gc.collect()
        return GroupResult(group.name, group.engine_args, len(group.requests), 0, 0, 0.0, 0.0, error=one_line(exc),
                           error_kind="memory" if is_out_of_memory(exc) else "exception")


def is_out_of_memory(exc: BaseException) -> bool:
    """A refused allocation (MemoryError under the address-space limit, torch's OutOfMemoryError)."""
    return isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError"


def engine_import_root() -> Path | None:
    """The folder this interpreter imports the engine package from (an overlay's, a venv's), found
    without importing it; None where there is no engine (the HF reference)."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]).resolve().parent


class Tracer:
    """coverage.py over the job's `trace` entries, one dynamic context per group; a no-op without.

    An entry is a source file or a folder; a relative one ("vllm/v1/sample/sampler.py") is found
    where this interpreter imports the engine from, and the files under that root are reported by
    their relative path, so the base and the patched run name the same file alike. The text of each
    traced file (None where this variant lacks it) is saved beside the lines (SOURCES): what the
    grade stage maps lines to functions and hunks with (docs/design.md, "Code-path evidence")."""

    def __init__(self, entries: list[str]) -> None:
        self.cov = None
        self.context = ""  # coverage's context before the first group: import-time lines
        self.recorded: dict[str, dict[str, list[int]]] = {}  # context -> file -> lines, as last written
        self.root = engine_import_root() if entries else None
        self.paths = [p for p in (self.resolve(e) for e in entries) if p is not None]
        if self.paths:
            import coverage

            include = [f"{p}/*" if p.is_dir() else str(p) for p in self.paths]
            self.cov = coverage.Coverage(data_file=None, include=include, branch=False, config_file=False)
            self.cov.start()
        self.sources = {self.name(str(p)): (p.read_text() if p.is_file() else None) for p in self.paths
                        if not p.is_dir()}

    def resolve(self, entry: str) -> Path | None:
        path = Path(entry)
        if path.is_absolute():
            return path.resolve()
        return (self.root / path).resolve() if self.root is not None else None

    def name(self, file: str) -> str:
        path = Path(file).resolve()
        if self.root is not None and path.is_relative_to(self.root):
            return str(path.relative_to(self.root))
        return str(path)

    def group(self, name: str) -> None:
        if self.cov is not None:
            self.cov.switch_context(name)
            self.context = name

    def save(self, out: Path) -> None:
        """The last write, measurement stopped: every context read again (a line a background thread
        ran after its group's checkpoint is kept)."""
        if self.cov is not None:
            self.cov.stop()
            self.recorded = {}
            self.checkpoint(out, every_context=True)

    def checkpoint(self, out: Path, every_context: bool = False) -> None:
        """Write what was recorded so far (after each group): a worker killed later still leaves
        the lines of the groups it finished, which a resumed run reuses. Only the current group's
        context is read here, so a checkpoint costs one group's lines, not the whole run's so far
        (over the whole engine package, re-reading every context after every group is quadratic)."""
        if self.cov is None:
            return
        data = self.cov.get_data()
        if every_context:
            contexts = sorted(data.measured_contexts())
        else:
            contexts = [self.context]
        for context in contexts:
            data.set_query_context(context)
            files = {}
            for file in sorted(data.measured_files()):
                lines = data.lines(file)
                if lines:
                    files[self.name(file)] = sorted(lines)
            if files:
                self.recorded[context] = files
        data.set_query_contexts(None)
        for name, payload in ((SOURCES, self.sources), (TRACE, self.recorded)):  # sources first: a trace implies them
            tmp = out / f".{name}.tmp"
            tmp.write_text(json.dumps(payload))
            tmp.replace(out / name)


def run_job(job: Job, out: Path) -> None:
    tracer = Tracer(job.trace)
    try:
        run_groups(job, out, tracer)
    finally:
        tracer.save(out)


def run_groups(job: Job, out: Path, tracer: Tracer) -> None:
    progress = ProgressWriter(out, job.groups)  # before the engine's import: a starting worker shows as one
    if job.backend == "vllm":
        from infercheck.run import vllm_backend as backend
    else:
        from infercheck.run import hf_backend as backend  # type: ignore[no-redef]
    with (out / RESULTS).open("a") as results, (out / GROUPS).open("a") as groups, \
            (out / LM_EVAL).open("a") as lm_eval_rows:
        for index, group in enumerate(job.groups, 1):
            tracer.group(group.name)
            progress.start_group(index, group.name)

            def emit(result: RequestResult) -> None:
                results.write(json.dumps(asdict(result)) + "\n")
                results.flush()

            def emit_samples(rows: list[dict[str, Any]]) -> None:
                lm_eval_rows.writelines(json.dumps(r) + "\n" for r in rows)
                lm_eval_rows.flush()

            sink = Sink(emit, emit_samples, progress.finished)
            summary = run_isolated(backend, job, group, sink) if group.isolated else backend.run_group(job, group, sink)
            tracer.checkpoint(out)  # before the group's row: a finished group always has its lines
            groups.write(json.dumps(asdict(summary)) + "\n")
            groups.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="worker")
    parser.add_argument("--job", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--probe", action="store_true")
    args = parser.parse_args(argv)
    if args.probe:
        print(json.dumps(probe()))
        return 0
    watch_harness()  # never outlive the harness, however it ends (run/lifeline.py)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    booted = started - seconds_since_exec()
    write_status(out, state="running", started=started)
    try:
        return run_reporting(args.job, out, started)
    finally:
        write_timing(out, booted, started)


def run_reporting(job_file: Path, out: Path, started: float) -> int:
    """Run the job; how it ended goes to status.json, the exit code is returned."""
    try:
        job = Job.load(job_file)
        run_job(job, out)
    except WorkerInputError as exc:
        write_status(out, state="error", kind=exc.kind, message=str(exc))
        return EXIT_HANDLED_ERROR
    except InfercheckError as exc:
        write_status(out, state="error", kind="bad_job", message=str(exc))
        return EXIT_HANDLED_ERROR
    except Exception as exc:  # the harness turns this into one line; the trace stays in stderr
        traceback.print_exc()
        kind = "memory" if is_out_of_memory(exc) else "exception"
        write_status(out, state="error", kind=kind, message=one_line(exc))
        return EXIT_HANDLED_ERROR
    write_status(out, state="done", started=started, elapsed_s=round(time.time() - started, 3))
    return 0


if __name__ == "__main__":
    sys.exit(main())
