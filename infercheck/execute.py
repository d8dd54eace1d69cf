"""Stage 4, run: the workers of a validate, side by side in the run's CPU slots (docs/design.md,
"Pipeline" and "Running workers side by side").

Base and patched (the same engine job) first; once base ran, the pytest symptom in both envs, the
engine's own tests of the touched modules (unmodified, then base and patched) and the HF reference's
lm-eval tasks, and the noise floor (the unmodified engine on the parity workloads, then its reference
scoring; checks/noise_floor.py); each variant's reference re-scoring once that variant ran (patched's
after base's: what both generated alike is scored once and read from the cache). Workers queue for slots
in that order, so with one slot (`--jobs 1`) they run one after another as listed. A worker that
fails stops what has not started yet (nothing after it could be judged); how each worker ended is
saved as `runs/outcome.json` (infercheck/run/store.py), in the order above whatever order they
finished in, which is all the grade stage needs beside the rows.
"""

from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator

from infercheck.build.engine_env import EngineEnv, installed_env
from infercheck.build.tree import EngineTree, find_installed_engine
from infercheck.build.variants import Variants
from infercheck.console import LiveWorkers, Progress
from infercheck.device import detect_device
from infercheck.names import ENGINE_VARIANTS, SymptomKind, Variant
from infercheck.options import ValidateOptions
from infercheck.engine_test_tree import engine_test_tree
from infercheck.neighbours import select_engine_tests
from infercheck.plan import ALONE, EngineTestsPlan, Plan, engine_job, floor_job, reference_eval_job, reference_job
from infercheck.run.cache import launch_cached, run_pytest_cached
from infercheck.run.cancel import Cancel, results_or_cancel
from infercheck.run.engine_tests import run_engine_tests_cached
from infercheck.run.job import Job
from infercheck.run.launcher import WorkerRun, launch
from infercheck.run.slots import Placement, SlotPool
from infercheck.run.store import (ENGINE_TEST_SELECTION, FLOOR, REFERENCE_EVAL, UNMODIFIED, RunOutcome, WorkerOutcome,
                                  engine_tests_folder, pytest_folder, reference_worker)

ENGINE_TESTS_TIMEOUT_S = 300.0  # one env's run of the selected engine tests (target: under 60 s)
MAX_TASKS = 8  # threads waiting on workers; the slots bound how many run


class Skipped(Exception):
    """A worker not started because one it follows failed (nothing it would tell can be judged)."""


@dataclass
class Runner:
    opts: ValidateOptions
    runs_dir: Path
    progress: Progress
    deadline: float | None = None  # --run-timeout: when the whole run's time is up (time.time())
    live: LiveWorkers | None = None  # live worker lines on a terminal (infercheck/console.py)
    slots: SlotPool | None = None  # where workers run (run/slots.py); None: here, as the env says
    stopped: threading.Event = field(default_factory=threading.Event)  # a worker failed: start no more
    waits: dict[int, float] = field(default_factory=dict)  # thread -> seconds its last worker waited for a slot
    cancel: Cancel = field(default_factory=Cancel)  # the harness was interrupted: start nothing (run/cancel.py)

    def waited(self) -> float:
        """Seconds this thread's last worker waited for its slot (not the worker's own time)."""
        return self.waits.pop(threading.get_ident(), 0.0)

    def identity(self, env: EngineEnv) -> EngineEnv:
        """The env as workers of this run run it (the pool's thread count), before a slot is chosen."""
        return self.slots.identity(env) if self.slots is not None else env

    def place(self, env: EngineEnv) -> ContextManager[EngineEnv]:
        """A Placement (run/slots.py): a free slot for the block, unless the run stopped meanwhile
        (Skipped)."""
        return self.placed(env, skip_if_stopped=True)

    def place_engine(self, env: EngineEnv) -> ContextManager[EngineEnv]:
        """The Placement of base and patched: they run whatever the other did (grading tells a
        failed base from a failed patched)."""
        return self.placed(env, skip_if_stopped=False)

    @contextlib.contextmanager
    def placed(self, env: EngineEnv, skip_if_stopped: bool) -> Iterator[EngineEnv]:
        asked = time.time()
        slot = self.slots.placed(env) if self.slots is not None else contextlib.nullcontext(env)
        with slot as placed:
            self.waits[threading.get_ident()] = time.time() - asked
            if self.cancel.is_set or (skip_if_stopped and self.stopped.is_set()):
                raise Skipped()
            yield placed

    def run(self, job: Job, env: EngineEnv, name: str, outcome: RunOutcome, engine: bool = False) -> WorkerRun | None:
        """One worker under the per-worker timeout and what is left of the whole run's; None when it
        was not started because an earlier worker failed (never for an engine: `engine`)."""
        try:
            run = self.run_worker(job, env, name, outcome, self.place_engine if engine else self.place)
        except Skipped:
            return None
        if not run.ok:
            self.stopped.set()
        return run

    def run_worker(self, job: Job, env: EngineEnv, name: str, outcome: RunOutcome, place: Placement) -> WorkerRun:
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
                run, reused = launch_cached(job, self.identity(env), self.runs_dir / name, timeout, reuse=self.opts.reuse,
                                            watch=self.live.watch(env.name) if self.live is not None else None,
                                            place=place, launcher=self.slots.launch if self.slots is not None else launch)
            finally:
                if self.live is not None:
                    self.live.finish(env.name)
            started += self.waited()  # the worker's own time, not its wait for a slot
            state = "ok" if run.ok else f"FAILED ({run.error_kind})"
            if reused:
                state += f", {reused}/{len(job.groups)} group(s) reused from cache"
            self.progress(f"run {env.name}: {state} in {time.time() - started:.1f}s")
        wall = time.time() - started
        outcome.workers[name] = WorkerOutcome(run.ok, run.error_kind, run.error, round(run.elapsed_s, 2), reused,
                                              wall_s=round(wall, 2))
        return run


def execute(plan: Plan, variants: Variants, runner: Runner) -> RunOutcome:
    """Run every worker the plan needs and save how each ended; returns that record. A run cancelled
    meanwhile (run/cancel.py) raises Cancelled and saves nothing: `--resume` redoes what it stopped."""
    outcome = RunOutcome(build_error=variants.build_error)
    if variants.patched is not None:
        run_workers(plan, variants, variants.patched, runner, outcome)
    runner.cancel.raise_if_set()
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

    def run_in(label: str, env: EngineEnv) -> None:
        started = time.time()
        try:
            run = run_engine_tests_cached(tests, selection.node_ids(), runner.identity(env),
                                          runner.runs_dir / engine_tests_folder(label), timeout, runner.opts.reuse,
                                          place=runner.place)
        except Skipped:
            return
        started += runner.waited()
        outcome.engine_tests[label] = run
        state = run.error or f"exit {run.returncode}"
        runner.progress(f"engine tests {label}: {state}{', reused from cache' if run.reused else ''} "
                        f"in {time.time() - started:.1f}s")

    first, *rest = envs.items()
    run_in(*first)
    if first[0] == UNMODIFIED and (first[0] not in outcome.engine_tests or outcome.engine_tests[first[0]].error):
        return  # what runs here is unknown: nothing can be judged
    side_by_side([lambda item=item: run_in(*item) for item in rest])


def side_by_side(tasks: list[Callable[[], Any]]) -> list[Any]:
    """Run the tasks in threads (each waits for a slot of its own when it starts a worker) and
    return their results in order; an exception in one is raised once all have ended."""
    if len(tasks) <= 1:
        return [task() for task in tasks]
    with ThreadPoolExecutor(max_workers=min(len(tasks), MAX_TASKS)) as pool:
        futures = [pool.submit(task) for task in tasks]
        return [f.result() for f in futures]


def run_workers(plan: Plan, variants: Variants, patched: EngineEnv, runner: Runner, outcome: RunOutcome) -> None:
    """Every worker of the run, in the order the module docstring gives, side by side where the
    runner's slots allow."""
    job = engine_job(plan)
    envs = {Variant.BASE: variants.base, Variant.PATCHED: patched}
    reference_env = replace(installed_env(detect_device()), name="reference")
    with ThreadPoolExecutor(max_workers=MAX_TASKS) as pool:
        engines: dict[Variant, Future] = {}
        for variant, env in envs.items():
            engines[variant] = pool.submit(runner.run, job, env, variant, outcome, True)

        def after(variant: Variant, task: Callable[[], Any]) -> Future:
            """task once `variant`'s engine ran; nothing if it failed."""
            def wait_then() -> Any:
                run = engines[variant].result()
                return task() if run is not None and run.ok else None
            return pool.submit(wait_then)

        tasks = list(engines.values())
        if plan.symptom is not None and plan.symptom.kind == SymptomKind.PYTEST:
            tasks += [after(Variant.BASE, lambda v=v, e=e: run_symptom_test(plan, v, e, runner, outcome))
                      for v, e in envs.items()]
        if plan.engine_tests is not None and variants.tree is not None and variants.unmodified is not None:
            envs_for_tests = {UNMODIFIED: variants.unmodified, **envs}
            tasks.append(after(Variant.BASE, lambda: run_engine_test_stage(plan.engine_tests, variants.tree,
                                                                            envs_for_tests, runner, outcome)))
        # where base is the unmodified engine, its own run and scoring are the floor's batched side
        floor = floor_job(plan, batched=not variants.base_is_unmodified) if runner.opts.floor else None
        if floor is not None and variants.unmodified is not None:
            unmodified = variants.unmodified
            tasks.append(after(Variant.BASE, lambda: run_floor(plan, floor, unmodified, reference_env, runner, outcome)))
        eval_job = reference_eval_job(plan)
        if eval_job is not None:
            tasks.append(after(Variant.BASE, lambda: runner.run(eval_job, replace(reference_env, name=REFERENCE_EVAL),
                                                                REFERENCE_EVAL, outcome)))
        scored: Future | None = None
        for variant in ENGINE_VARIANTS:  # one after another: where patched generated what base did, its
            # reference groups are base's, read from the cache instead of computed twice side by side
            previous = scored

            def score(v: Variant = variant, previous: Future | None = previous) -> None:
                if previous is not None:
                    previous.result()
                run_reference(plan, v, engines[v].result(), reference_env, runner, outcome)
            scored = after(variant, score)
            tasks.append(scored)
        results_or_cancel(tasks, runner.cancel)
    in_order(outcome)


def run_symptom_test(plan: Plan, variant: Variant, env: EngineEnv, runner: Runner, outcome: RunOutcome) -> None:
    """The pytest symptom in one variant's env."""
    started = time.time()
    try:
        result, reused = run_pytest_cached(plan.symptom, runner.identity(env), runner.runs_dir / pytest_folder(variant),
                                           runner.opts.timeout_s, plan.trace, runner.opts.reuse, place=runner.place)
    except Skipped:
        return
    started += runner.waited()
    outcome.pytest[variant] = replace(result, wall_s=round(time.time() - started, 2), reused=reused)
    state = "passed" if result.passed else f"failed (exit {result.returncode})"
    runner.progress(f"pytest {env.name}: {state}{', reused from cache' if reused else ''} "
                    f"in {time.time() - started:.1f}s")


def run_reference(plan: Plan, variant: Variant, engine: WorkerRun, reference_env: EngineEnv, runner: Runner,
                  outcome: RunOutcome) -> None:
    """The HF reference re-scoring one variant's outputs."""
    name = reference_worker(variant)
    ref_job, _ = reference_job(plan, engine.results())
    runner.run(ref_job, replace(reference_env, name=name), name, outcome)


def run_floor(plan: Plan, job: Job, unmodified: EngineEnv, reference_env: EngineEnv, runner: Runner,
              outcome: RunOutcome) -> None:
    """The noise floor (checks/noise_floor.py): the unmodified engine on the parity workloads in two
    batch compositions, then the reference re-scoring the batched one (a job of alone groups only
    has none: base's run and scoring are its batched side). A floor that fails leaves the table's
    tolerances (the report says why); it never stops the run's other workers."""
    def measured(job: Job, env: EngineEnv, name: str) -> WorkerRun | None:
        try:
            return runner.run_worker(job, replace(env, name=name), name, outcome, runner.place)
        except Skipped:
            return None
    run = measured(job, unmodified, FLOOR)
    batched = [r for r in run.results() if not r.group.endswith(ALONE)] if run is not None and run.ok else []
    if batched:
        ref_job, _ = reference_job(plan, batched)
        measured(ref_job, reference_env, reference_worker(FLOOR))


def in_order(outcome: RunOutcome) -> None:
    """The outcome's records in the order the workers are listed (module docstring), not the order
    they finished in: the same run reads the same whatever the slots."""
    workers = [*ENGINE_VARIANTS, *(reference_worker(v) for v in ENGINE_VARIANTS), REFERENCE_EVAL, FLOOR,
               reference_worker(FLOOR)]
    for records, order in ((outcome.workers, workers), (outcome.pytest, list(ENGINE_VARIANTS)),
                           (outcome.engine_tests, [UNMODIFIED, *ENGINE_VARIANTS])):
        ordered = sorted(records.items(), key=lambda item: order.index(item[0]) if item[0] in order else len(order))
        records.clear()
        records.update(ordered)
