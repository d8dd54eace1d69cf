"""`infercheck validate` and `infercheck regrade`: the stages in order (docs/design.md, "Pipeline").

    intake → plan → build → run → grade → verdict → report

Each stage is a function with a typed result handed to the next; only the run stage's workers
touch an engine. Bad input found before any worker starts raises InfercheckError (one line, exit
2); anything that goes wrong once runs have started ends in a verdict (ERROR:<stage>) with a
report, never a traceback. `regrade` repeats grade → verdict → report from a run folder.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from infercheck.breakdown import time_breakdown
from infercheck.build.tree import find_installed_engine
from infercheck.build.variants import build_variants
from infercheck.console import LiveWorkers, Progress
from infercheck.device import detect_device
from infercheck.draw import Draw
from infercheck.engine_limits import engine_version, limitations_for
from infercheck.execute import Runner, execute
from infercheck.grade import Graded, Settings, grade
from infercheck.intake import Intake, intake, save_selection, with_stored_selection
from infercheck.names import Notice
from infercheck.options import ValidateOptions, load_options, save_options
from infercheck.paths import cache_dir, reports_dir
from infercheck.plan import Plan, plan_for, stage_plan
from infercheck.records import Flag, ValidationRun
from infercheck.report.files import load_run, write_index, write_report, write_results
from infercheck.report.view import fmt_pass
from infercheck.run.cancel import Cancel
from infercheck.run.launcher import CONTAINMENT
from infercheck.run.slots import SlotPool, default_jobs
from infercheck.run.store import StoredRun, load_stored
from infercheck.verdict import decide

RUNS = "runs"


def report_folder(opts: ValidateOptions, started: datetime) -> Path:
    if opts.out:
        return opts.out
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{opts.case + '-' if opts.case else ''}{opts.patch.stem}")[:60]
    folder = reports_dir() / f"{started.strftime('%Y%m%d-%H%M%S')}-{slug}"
    n = 1
    while folder.exists():
        n += 1
        folder = folder.with_name(f"{folder.name.rsplit('~', 1)[0]}~{n}")
    return folder


class Timer:
    """Seconds per stage, reported as each one ends."""

    def __init__(self, progress: Progress) -> None:
        self.progress, self.stages, self.since = progress, {}, time.time()

    def done(self, name: str) -> None:
        now = time.time()
        self.stages[name] = round(now - self.since, 2)
        self.progress(f"{name}: done in {self.stages[name]:.1f}s")
        self.since = now


def graded_flags(found: Intake, graded: Graded) -> list[Flag]:
    """The run-level flags: errors that stopped judging, and the patch editing its own judges
    (kept whatever the headline: a reviewer must see it)."""
    flags = list(graded.run_flags)
    if found.judges:
        flags.append(Flag(Notice.EDITS_OWN_JUDGES, None, f"the patch edits its own judges: "
                          f"{', '.join(found.judges)} (engine tests / CI config); the verdict does not run them"))
    return flags


def grade_run(found: Intake, the_plan: Plan, stored: StoredRun, version: str, device: str) -> Graded:
    """Grade a run's stored results (the pure stage over what the run stage left); `version` and
    `device` name the build it ran on, whose known limitations may explain a failure on base."""
    settings = Settings(found.profile, found.signals, found.floor, not found.base_patches,
                        limitations_for(version, device))
    return grade(the_plan, stored, settings, found.patch.text)


def with_seed(opts: ValidateOptions) -> ValidateOptions:
    """The options with the run's prompt-draw seed fixed (a fresh one where none was given) and
    named in the command that reproduces the run."""
    seed = Draw.fresh().seed if opts.seed is None else opts.seed
    command = opts.command if not opts.command or "--seed" in opts.command else f"{opts.command} --seed {seed}"
    return replace(opts, seed=seed, command=command)


def worker_pool(opts: ValidateOptions, device: str, cancel: Cancel) -> SlotPool:
    """Where the run's workers run: this machine's CPU slots, or Ray tasks (`--ray`)."""
    jobs, lock_dir = opts.jobs or default_jobs(device), cache_dir() / "slots"
    if opts.ray is None:
        return SlotPool(jobs, device, lock_dir, cancel)
    from infercheck.run.ray_pool import RayPool  # Ray is an optional extra

    return RayPool(opts.ray, jobs, device, lock_dir, cancel)


def validate(opts: ValidateOptions, progress: Progress, live: LiveWorkers | None = None,
             cancel: Cancel | None = None) -> tuple[ValidationRun, Path]:
    """The whole pipeline for one patch; `progress` gets stage lines, `live` the running workers';
    `cancel` is shared with the other runs of the same invocation (a bench's streams)."""
    t0 = time.time()
    started = datetime.now(timezone.utc)
    timer = Timer(progress)
    opts = with_seed(opts)
    progress(f"prompt draw: seed {opts.seed}")
    found = intake(opts)
    timer.done("intake")
    the_plan = plan_for(found)
    progress(f"plan: {len(the_plan.workloads)} generation workload(s), {len(the_plan.accuracy_suites())} lm-eval "
             f"suite(s): {', '.join(s.name for s in found.suites)}; {len(found.apps)} app(s): "
             f"{', '.join(a.name for a in found.apps) or 'none'}")
    timer.done("plan")
    device = detect_device()
    variants = build_variants(opts.engine_src, found.base_patches, found.patch, device)  # a patch that does not apply stops here
    timer.done("build")
    out = report_folder(opts, started)
    stage_plan(the_plan, out / "inputs")
    save_options(opts, out)
    save_selection(found, out / "inputs")
    deadline = t0 + opts.run_timeout_s if opts.run_timeout_s else None
    cancel = cancel or Cancel()
    slots = worker_pool(opts, device, cancel)
    execute(the_plan, variants, Runner(opts, out / RUNS, progress, deadline, live, slots, cancel=cancel))
    timer.done("run")
    stored = load_stored(out / RUNS)
    engine = find_installed_engine()
    graded = grade_run(found, the_plan, stored, engine.version, device)
    timer.done("grade")
    for check in graded.checks:
        progress(f"check {check.name}: base {fmt_pass(check.base.passed)}, patched {fmt_pass(check.patched.passed)}"
                 f"{' [' + ', '.join(check.flags) + ']' if check.flags else ''}")
    run = ValidationRun(out.name, found.patch_info(), found.base_patch_infos(), found.model_name, opts.dtype, device,
                        f"{engine.distribution} {engine.version}", opts.command, started.isoformat(), 0.0,
                        timer.stages, graded.checks,
                        decide(graded.checks, graded_flags(found, graded), found.symptom is not None, opts.fail_on),
                        opts.case, opts.expected, containment=read_containment(out / RUNS / "patched"),
                        seed=opts.seed, timing=time_breakdown(stored))
    run.elapsed_s = round(time.time() - t0, 2)
    write_report(run, out)
    if out.parent == reports_dir():
        write_index(reports_dir())
    timer.done("report")
    run.stages = dict(timer.stages)
    write_results(run, out)  # the report stage's own time, known once the page is written
    return run, out


def regrade(run_dir: Path, fail_on: list[str] | None = None) -> tuple[ValidationRun, Path]:
    """Grade, verdict and report again from a run folder's stored results and inputs, no engine:
    for an unchanged harness the verdict.json written is the one the run wrote. `fail_on` replaces
    the run's own failing verdicts (its exit code) for this grading."""
    stored_run = load_run(run_dir)
    opts = load_options(run_dir, "regrade")
    found = with_stored_selection(intake(opts), run_dir / "inputs")
    graded = grade_run(found, plan_for(found), load_stored(run_dir / RUNS), engine_version(stored_run.engine),
                       stored_run.device)
    verdict = decide(graded.checks, graded_flags(found, graded), found.symptom is not None, fail_on or opts.fail_on)
    run = replace(stored_run, checks=graded.checks, verdict=verdict)
    write_report(run, run_dir)
    if run_dir.resolve().parent == reports_dir().resolve():
        write_index(reports_dir())
    return run, run_dir


def read_containment(worker_dir: Path) -> dict:
    try:
        return json.loads((worker_dir / CONTAINMENT).read_text())
    except (OSError, ValueError):
        return {}
