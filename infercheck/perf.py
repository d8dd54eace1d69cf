"""`infercheck perf` (`make bench-perf`): where a validate's time goes on this machine, measured on
a bundled case (default the demo's) (docs/design.md, "Where the time goes").

Each round starts from a fresh cache folder and runs, one after another:

- cold: the case's first candidate with nothing cached (engine tree, overlays, every group);
- warm: the same candidate again, same cache and prompt draw: every group reused;
- candidate: a further candidate of the case: base and reference cached, its patched worker runs.

After the rounds, one multi-candidate run (`validate A B`) of both candidates in a fresh cache.
Every validate is its own `infercheck validate` process, timed from outside (interpreter start to
exit); its results.json gives the per-worker breakdown. The JSON holds every sample and, per
scenario, medians over the rounds.
"""

from __future__ import annotations

import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import astuple, dataclass, field
from datetime import datetime, timezone
from enum import StrEnum
from pathlib import Path
from typing import Callable

from infercheck.candidates import CANDIDATES_JSON
from infercheck.cases import load_case
from infercheck.errors import InfercheckError
from infercheck.records import to_data
from infercheck.report.files import json_text, load_run, write_texts
from infercheck.run.store import read_json_file
from infercheck.timing import Seconds, TimeBreakdown

Progress = Callable[[str], None]
CACHE_VARIABLE = "INFERCHECK_CACHE"
ACCEPTED_EXITS = (0, 1)  # a verdict (passing or failing); 2 and above: bad input or a harness failure


class Scenario(StrEnum):
    COLD = "cold"
    WARM = "warm"
    CANDIDATE = "candidate"
    MULTI = "multi-candidate"


@dataclass(frozen=True)
class Completed:
    """One command, as the bench saw it."""

    returncode: int
    wall_s: float
    stderr_tail: str = ""


Runner = Callable[[list[str], dict[str, str]], Completed]  # (argv, environment) -> how it ended


def run_command(argv: list[str], environ: dict[str, str]) -> Completed:
    """Run a command to its end, stdout discarded, stderr's last lines kept."""
    started = time.monotonic()
    proc = subprocess.run(argv, env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          check=False)
    tail = "\n".join(proc.stderr.strip().splitlines()[-3:])
    return Completed(proc.returncode, round(time.monotonic() - started, 2), tail)


@dataclass(frozen=True)
class PerfPlan:
    case: Path  # a case folder
    first: Path  # its first candidate's patch (the demo's)
    further: Path  # another candidate of the same case
    rounds: int
    seed: int  # one prompt draw for every run: a warm run reuses the cold run's groups
    work: Path  # the run folders: work/round-N/<scenario>/, work/multi-candidate/
    cache_root: Path  # a fresh cache folder per round under it, removed after the round


def perf_plan(case_folder: Path, rounds: int, seed: int, work: Path, cache_root: Path) -> PerfPlan:
    """The plan for a case with at least two candidates; bad input is one line."""
    if rounds < 1:
        raise InfercheckError(f"--runs must be at least 1 (got {rounds})")
    case = load_case(case_folder)
    if len(case.candidates) < 2:
        raise InfercheckError(f"case {case.id} has {len(case.candidates)} candidate(s): the further-candidate run "
                              f"needs two")
    if work.exists():
        raise InfercheckError(f"{work} exists: the runs need a fresh folder (an old run folder would be resumed, "
                              f"and a cold run would not be cold)")
    return PerfPlan(case.folder, case.candidates[0].patch, case.candidates[1].patch, rounds, seed, work, cache_root)


@dataclass
class Sample:
    """One validate: the command's wall and the run's own record."""

    scenario: Scenario
    wall_s: float  # the command, interpreter start to exit (multi-candidate: the candidate's share)
    elapsed_s: float  # the validate's own clock (results.json)
    verdict: str
    stages: dict[str, float]
    timing: TimeBreakdown

    @property
    def engine_work_s(self) -> float:
        return self.timing.total().engine_work_s


def sample_of(scenario: Scenario, wall_s: float, folder: Path) -> Sample:
    run = load_run(folder)
    return Sample(scenario, wall_s, run.elapsed_s, str(run.verdict.headline), dict(run.stages), run.timing)


@dataclass
class ScenarioSummary:
    """Medians over a scenario's samples (each ratio: the median of the samples' ratios)."""

    scenario: Scenario
    runs: int
    verdicts: list[str]
    wall_s: float  # the command
    elapsed_s: float  # validate's own clock
    stages: dict[str, float]
    workers: Seconds  # every worker's parts added up
    per_worker: dict[str, Seconds]
    engine_work_s: float  # generation and reference scoring
    engine_share: float | None  # engine work / the workers' wall (None: every group reused)
    wall_per_engine_work: float | None  # the command's wall / engine work (None: no engine work)


def median_of(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.median(known), 4) if known else None


def median_seconds(items: list[Seconds]) -> Seconds:
    return Seconds(*(statistics.median(column) for column in zip(*map(astuple, items)))).rounded()


def median_by_key(items: list[dict[str, float]]) -> dict[str, float]:
    keys = list(dict.fromkeys(k for item in items for k in item))
    return {k: round(statistics.median([item[k] for item in items if k in item]), 3) for k in keys}


def summarise(scenario: Scenario, samples: list[Sample]) -> ScenarioSummary:
    """The medians of one scenario's samples (at least one)."""
    names = list(dict.fromkeys(w.worker for s in samples for w in s.timing.workers))
    per_worker = {name: median_seconds([w.seconds for s in samples for w in s.timing.workers if w.worker == name])
                  for name in names}
    return ScenarioSummary(
        scenario, len(samples), [s.verdict for s in samples], round(statistics.median(s.wall_s for s in samples), 2),
        round(statistics.median(s.elapsed_s for s in samples), 2), median_by_key([s.stages for s in samples]),
        median_seconds([s.timing.total() for s in samples]), per_worker,
        round(statistics.median(s.engine_work_s for s in samples), 3),
        median_of([s.timing.total().engine_share for s in samples]),
        median_of([s.wall_s / s.engine_work_s if s.engine_work_s > 0 else None for s in samples]))


@dataclass
class PerfResult:
    case: str
    candidates: list[str]  # the first and the further candidate's patches
    seed: int
    rounds: int
    started: str
    cpus: int
    machine: str
    work: str
    summaries: list[ScenarioSummary] = field(default_factory=list)
    multi_candidate_wall_s: float | None = None  # the multi-candidate command, both candidates
    samples: list[Sample] = field(default_factory=list)


def validate_argv(patches: list[Path], plan: PerfPlan, out: Path) -> list[str]:
    return [sys.executable, "-m", "infercheck.cli", "validate", *map(str, patches), "--case", str(plan.case),
            "--seed", str(plan.seed), "--out", str(out), "--quiet"]


def measured(runner: Runner, scenario: Scenario, patches: list[Path], plan: PerfPlan, out: Path,
             cache: Path) -> Completed:
    """Run one validate into `out` with `cache` as its cache; a harness failure or bad input stops the bench."""
    done = runner(validate_argv(patches, plan, out), {**os.environ, CACHE_VARIABLE: str(cache)})
    if done.returncode not in ACCEPTED_EXITS:
        last = done.stderr_tail.splitlines()[-1] if done.stderr_tail else "no message"
        raise InfercheckError(f"perf {scenario}: validate exited with {done.returncode} ({out}): {last}")
    return done


def fresh_cache(plan: PerfPlan, label: str) -> Path:
    try:
        plan.cache_root.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(dir=plan.cache_root, prefix=f"{label}-"))
    except OSError as exc:
        raise InfercheckError(f"cannot make a fresh cache folder under {plan.cache_root}: {exc.strerror or exc}") \
            from None


def run_round(plan: PerfPlan, index: int, runner: Runner, progress: Progress) -> list[Sample]:
    """cold, warm and a further candidate in one fresh cache, removed afterwards."""
    cache = fresh_cache(plan, f"round-{index}")
    steps = ((Scenario.COLD, plan.first), (Scenario.WARM, plan.first), (Scenario.CANDIDATE, plan.further))
    samples = []
    try:
        for scenario, patch in steps:
            out = plan.work / f"round-{index}" / scenario
            done = measured(runner, scenario, [patch], plan, out, cache)
            samples.append(sample_of(scenario, done.wall_s, out))
            progress(f"perf round {index}/{plan.rounds} {scenario}: {done.wall_s:.1f}s ({samples[-1].verdict}), "
                     f"engine work {samples[-1].engine_work_s:.1f}s")
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return samples


def run_multi(plan: PerfPlan, runner: Runner, progress: Progress) -> tuple[float, list[Sample]]:
    """Both candidates in one `validate A B`, fresh cache: its wall and each candidate's sample."""
    cache = fresh_cache(plan, "multi")
    out = plan.work / Scenario.MULTI
    try:
        done = measured(runner, Scenario.MULTI, [plan.first, plan.further], plan, out, cache)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    samples = [sample_of(Scenario.MULTI, row_elapsed, out / report) for report, row_elapsed in candidate_rows(out)]
    progress(f"perf {Scenario.MULTI}: {done.wall_s:.1f}s for {len(samples)} candidates")
    return done.wall_s, samples


def candidate_rows(out: Path) -> list[tuple[str, float]]:
    """(report folder, seconds) of each candidate in a multi-candidate run's candidates.json."""
    data = read_json_file(out / CANDIDATES_JSON)
    try:
        return [(str(row["report"]), float(row["elapsed_s"])) for row in (data or {})["candidates"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise InfercheckError(f"cannot read {out / CANDIDATES_JSON}: {type(exc).__name__}: {exc}") from None


def run_perf(plan: PerfPlan, runner: Runner = run_command, progress: Progress = lambda line: None) -> PerfResult:
    """Every round, then the multi-candidate run; the samples and their medians."""
    result = PerfResult(plan.case.name, [str(plan.first), str(plan.further)], plan.seed, plan.rounds,
                        datetime.now(timezone.utc).isoformat(timespec="seconds"), os.cpu_count() or 0,
                        platform.platform(), str(plan.work))
    for index in range(1, plan.rounds + 1):
        result.samples += run_round(plan, index, runner, progress)
    result.multi_candidate_wall_s, multi = run_multi(plan, runner, progress)
    result.samples += multi
    result.summaries = [summarise(s, [x for x in result.samples if x.scenario == s])
                        for s in Scenario if any(x.scenario == s for x in result.samples)]
    return result


def write_perf(result: PerfResult, path: Path) -> Path:
    return write_texts(path.parent, {"perf": (path.name, json_text(to_data(result)))})["perf"]


def perf_text(result: PerfResult) -> str:
    """The medians as plain lines, for the terminal."""
    lines = [f"{result.case}, {result.rounds} round(s), seed {result.seed}, {result.cpus} CPU(s); medians:"]
    for s in result.summaries:
        share = "—" if s.engine_share is None else f"{s.engine_share:.0%}"
        ratio = "—" if s.wall_per_engine_work is None else f"{s.wall_per_engine_work:.1f}x"
        lines.append(f"  {s.scenario:<16} wall {s.wall_s:7.1f}s  engine work {s.engine_work_s:6.1f}s "
                     f"({share} of worker wall; wall / engine work {ratio})  import {s.workers.import_s:.1f}s, "
                     f"engine start {s.workers.engine_start_s:.1f}s, lm-eval {s.workers.lm_eval_s:.1f}s, "
                     f"other {s.workers.other_s:.1f}s")
    if result.multi_candidate_wall_s is not None:
        lines.append(f"  multi-candidate command (both candidates, fresh cache): {result.multi_candidate_wall_s:.1f}s")
    return "\n".join(lines)
