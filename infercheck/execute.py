"""Stage 4, run: the workers of a validate, one after another (docs/design.md, "Pipeline").

Base, then patched (the same engine job), then the pytest symptom in both envs, then the engine's
own tests of the touched modules (unmodified, base, patched), then the HF reference re-scoring each
variant's outputs and running the lm-eval tasks. A worker that fails
stops the stage where nothing after it could be judged; how each worker ended is saved as
`runs/outcome.json` (infercheck/run/store.py), which is all the grade stage needs beside the rows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

from infercheck.build.engine_env import EngineEnv, installed_env
from infercheck.build.tree import EngineTree, find_installed_engine
from infercheck.build.variants import Variants
from infercheck.console import LiveWorkers, Progress
from infercheck.device import detect_device
from infercheck.names import ENGINE_VARIANTS, SymptomKind, Variant
from infercheck.options import ValidateOptions
from infercheck.engine_test_tree import engine_test_tree
from infercheck.neighbours import select_engine_tests
from infercheck.plan import EngineTestsPlan, Plan, engine_job, reference_eval_job, reference_job
from infercheck.run.cache import launch_cached, run_pytest_cached
from infercheck.run.engine_tests import run_engine_tests_cached
from infercheck.run.job import Job
from infercheck.run.launcher import WorkerRun
from infercheck.run.store import (ENGINE_TEST_SELECTION, REFERENCE_EVAL, UNMODIFIED, RunOutcome, WorkerOutcome,
                                  engine_tests_folder, pytest_folder, reference_worker)

ENGINE_TESTS_TIMEOUT_S = 300.0  # one env's run of the selected engine tests (target: under 60 s)


@dataclass
class Runner:
    opts: ValidateOptions
    runs_dir: Path
    progress: Progress
    deadline: float | None = None  # --run-timeout: when the whole run's time is up (time.time())
    live: LiveWorkers | None = None  # live worker lines on a terminal (infercheck/console.py)

    def run(self, job: Job, env: EngineEnv, name: str, outcome: RunOutcome) -> WorkerRun:
        """One worker under the per-worker timeout and what is left of the whole run's."""
        started = time.time()
        timeout = self.opts.timeout_s if self.deadline is None else min(self.opts.timeout_s, self.deadline - started)
        if timeout <= 0:
            self.progress(f"run {env.name}: not started, the run's time budget is spent")
            run = WorkerRun(env.name, self.runs_dir / name, False, None, 0.0, "timeout",
                            f"the run's time budget (--run-timeout {self.opts.run_timeout_s:g}s) was spent "
                            f"before this worker")
            reused = 0
        else:
            try:
                run, reused = launch_cached(job, env, self.runs_dir / name, timeout, reuse=self.opts.reuse,
                                            watch=self.live.watch(env.name) if self.live is not None else None)
            finally:
                if self.live is not None:
                    self.live.finish(env.name)
            state = "ok" if run.ok else f"FAILED ({run.error_kind})"
            if reused:
                state += f", {reused}/{len(job.groups)} group(s) reused from cache"
            self.progress(f"run {env.name}: {state} in {time.time() - started:.1f}s")
        outcome.workers[name] = WorkerOutcome(run.ok, run.error_kind, run.error, round(run.elapsed_s, 2), reused,
                                              wall_s=round(time.time() - started, 2))
        return run


def execute(plan: Plan, variants: Variants, runner: Runner) -> RunOutcome:
    """Run every worker the plan needs and save how each ended; returns that record."""
    outcome = RunOutcome(build_error=variants.build_error)
    if variants.patched is not None:
        run_workers(plan, variants, variants.patched, runner, outcome)
    outcome.save(runner.runs_dir)
    return outcome


def run_engine_test_stage(wanted: EngineTestsPlan, tree: EngineTree, envs: dict[str, EngineEnv], runner: Runner,
                          outcome: RunOutcome) -> None:
    """The engine's own tests of the touched modules in each env (unmodified first: what runs here),
    the selection saved beside the runs; a test tree that cannot be had or an empty selection is a
    note, the check skipped (docs/design.md, "Engine tests")."""
    started = time.time()
    tests = engine_test_tree(tree, find_installed_engine())
    if isinstance(tests, str):
        outcome.engine_tests_note = tests
        runner.progress(f"engine tests: skipped, {tests}")
        return
    selection = replace(select_engine_tests(wanted.patch_text, list(wanted.files), tests, wanted.engine_src),
                        tree=tests.label)
    runner.runs_dir.mkdir(parents=True, exist_ok=True)
    (runner.runs_dir / ENGINE_TEST_SELECTION).write_text(selection.to_json())
    if not selection.files:
        outcome.engine_tests_note = f"no engine test selected: {selection.note}"
        runner.progress(f"engine tests: skipped, {selection.note}")
        return
    runner.progress(f"engine tests: {len(selection.node_ids())} test(s) in {len(selection.files)} file(s) of "
                    f"{tests.label}, selected in {time.time() - started:.1f}s")
    timeout = min(runner.opts.timeout_s, ENGINE_TESTS_TIMEOUT_S)
    for label, env in envs.items():
        started = time.time()
        run = run_engine_tests_cached(tests, selection.node_ids(), env, runner.runs_dir / engine_tests_folder(label),
                                      timeout, runner.opts.reuse)
        outcome.engine_tests[label] = run
        state = run.error or f"exit {run.returncode}"
        runner.progress(f"engine tests {label}: {state}{', reused from cache' if run.reused else ''} "
                        f"in {time.time() - started:.1f}s")
        if label == UNMODIFIED and run.error is not None:
            return  # what runs here is unknown: nothing can be judged


def run_workers(plan: Plan, variants: Variants, patched: EngineEnv, runner: Runner, outcome: RunOutcome) -> None:
    base = variants.base
    job = engine_job(plan)
    envs = {Variant.BASE: base, Variant.PATCHED: patched}
    runs = {}
    for variant, env in envs.items():  # patched only once base ran: a failed base judges nothing
        runs[variant] = runner.run(job, env, variant, outcome)
        if not runs[variant].ok:
            return
    if plan.symptom is not None and plan.symptom.kind == SymptomKind.PYTEST:
        for variant, env in envs.items():
            started = time.time()
            result, reused = run_pytest_cached(plan.symptom, env, runner.runs_dir / pytest_folder(variant),
                                               runner.opts.timeout_s, plan.trace, runner.opts.reuse)
            outcome.pytest[variant] = replace(result, wall_s=round(time.time() - started, 2), reused=reused)
            state = "passed" if result.passed else f"failed (exit {result.returncode})"
            runner.progress(f"pytest {env.name}: {state}{', reused from cache' if reused else ''} "
                            f"in {time.time() - started:.1f}s")
    if plan.engine_tests is not None and variants.tree is not None and variants.unmodified is not None:
        run_engine_test_stage(plan.engine_tests, variants.tree, {UNMODIFIED: variants.unmodified, **envs}, runner,
                              outcome)
    reference_env = replace(installed_env(detect_device()), name="reference")
    for variant in ENGINE_VARIANTS:
        name = reference_worker(variant)
        ref_job, _ = reference_job(plan, runs[variant].results())
        if not runner.run(ref_job, replace(reference_env, name=name), name, outcome).ok:
            return
    eval_job = reference_eval_job(plan)
    if eval_job is not None:
        runner.run(eval_job, replace(reference_env, name=REFERENCE_EVAL), REFERENCE_EVAL, outcome)
