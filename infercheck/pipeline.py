"""`infercheck validate`: intake → plan → build → run → checks → verdict → report.

Each stage's output is plain data handed to the next; only run/ workers touch an engine. Bad input
found before any worker starts raises InfercheckError (one line, exit 2); anything that goes wrong
once runs have started ends in a verdict (ERROR:<stage>) with a report, never a traceback.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import yaml

from infercheck.build.builder import build_variant
from infercheck.build.engine_env import EngineEnv, installed_env
from infercheck.build.tree import engine_tree, find_installed_engine
from infercheck.apps import parse_id
from infercheck.checks.accuracy import accuracy_check, per_sample
from infercheck.checks.app_check import app_check
from infercheck.checks.signals import machine_drift, runtime_of
from infercheck.checks.static_signals import static_check
from infercheck.checks.parity_check import parity_check
from infercheck.checks.records import CheckResult, Flag, PatchInfo, ValidationRun
from infercheck.checks.symptom import app_symptom_check, symptom_check
from infercheck.device import detect_device
from infercheck.errors import BuildError, InfercheckError
from infercheck.models import zoo
from infercheck.neighbours import choose_apps
from infercheck.patch.intake import read_patch
from infercheck.paths import SUITES_DIR, reports_dir
from infercheck.plan import SYMPTOM, Plan, engine_job, make_plan, reference_eval_job, reference_job, stage_plan
from infercheck.report import write_index, write_report
from infercheck.run.cache import launch_cached
from infercheck.run.job import RequestResult, read_jsonl
from infercheck.run.launcher import CONTAINMENT, WorkerRun
from infercheck.run.pytest_runner import run_pytest
from infercheck.suites import SymptomSpec, load_symptom, select_suites
from infercheck.verdict import decide

Progress = Callable[[str], None]


@dataclass
class ValidateOptions:
    patch: Path
    base_patches: list[Path] = field(default_factory=list)
    engine_src: Path | None = None
    model: str = "tiny-llama-add"
    dtype: str = "float32"
    symptom: Path | None = None
    suites: list[str] | None = None
    apps: list[str] | None = None  # None: the neighbour map's choice for the touched files
    out: Path | None = None
    fail_on: list[str] | None = None
    timeout_s: float = 900.0  # per worker
    run_timeout_s: float | None = None  # the whole validate (every worker together)
    reuse: bool = True
    refuse_judge_edits: bool = False  # refuse (exit 2) a patch that edits engine tests or CI config
    case: str | None = None
    expected: str | None = None
    command: str = ""


@dataclass
class Variants:
    base: EngineEnv
    patched: EngineEnv | None
    build_error: str | None = None


EDITS_OWN_JUDGES = "EDITS_OWN_JUDGES"
CI_CONFIG = (".github/", ".buildkite/", ".gitlab-ci", ".circleci/", "tox.ini", "noxfile.py")


def judge_edits(patch: PatchInfo) -> list[str]:
    """Files of the patch that judge the engine rather than make it: its tests and CI config."""
    return [f for f, cls in patch.touched.items() if cls == "tests" or f.startswith(CI_CONFIG)]


def patch_info(path: Path) -> PatchInfo:
    patch = read_patch(path)
    return PatchInfo(str(path), path.name, patch.text, patch.classes)


def tolerance_profile(dtype: str) -> dict[str, float]:
    profiles = yaml.safe_load((SUITES_DIR / "tolerances.yaml").read_text())
    if dtype not in profiles:
        raise InfercheckError(f"no tolerance profile for dtype {dtype!r} (known: {', '.join(profiles)})")
    return {k: float(v) for k, v in profiles[dtype].items()}


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


def build_variants(opts: ValidateOptions, device: str) -> Variants:
    tree = engine_tree(opts.engine_src)
    base, _ = build_variant(tree, opts.base_patches, "base", device)
    try:
        patched, _ = build_variant(tree, [*opts.base_patches, opts.patch], "patched", device)
    except BuildError as exc:
        return Variants(base, None, str(exc))
    return Variants(base, patched)


def run_variant(job, env: EngineEnv, out: Path, opts: ValidateOptions, progress: Progress,
                deadline: float | None = None) -> WorkerRun:
    """One worker, under the per-worker timeout and what is left of the whole run's (--run-timeout)."""
    started = time.time()
    timeout = opts.timeout_s if deadline is None else min(opts.timeout_s, deadline - started)
    if timeout <= 0:
        progress(f"run {env.name}: not started, the run's time budget is spent")
        return WorkerRun(env.name, out, False, None, 0.0, "timeout",
                         f"the run's time budget (--run-timeout {opts.run_timeout_s:g}s) was spent before this worker")
    run, reused = launch_cached(job, env, out, timeout, reuse=opts.reuse)
    state = "ok" if run.ok else f"FAILED ({run.error_kind})"
    if reused:
        state += f", {reused}/{len(job.groups)} group(s) reused from cache"
    progress(f"run {env.name}: {state} in {time.time() - started:.1f}s")
    return run


def samples_of(run: WorkerRun) -> list[dict]:
    return read_jsonl(run.out_dir / "lm_eval.jsonl")


def signal_settings() -> dict[str, float]:
    return {k: float(v) for k, v in yaml.safe_load((SUITES_DIR / "signals.yaml").read_text()).items()}


def make_app_checks(plan: Plan, engine: dict[str, list[RequestResult]], refs: dict[str, dict[str, RequestResult]],
                    runs: dict[str, WorkerRun], profile: dict[str, float]) -> list[CheckResult]:
    affected = set(plan.symptom.affected) | {plan.symptom.app or ""} if plan.symptom else set()
    params = {r.id: r.sampling for sets in plan.app_sets().values() for s in sets for r in s.requests}
    groups = {v: runs[v].groups() for v in engine}
    signals = signal_settings()
    drift = machine_drift(groups["base"], groups["patched"])
    checks = []
    for app in plan.apps:
        mine = {v: [r for r in engine[v] if (parse_id(r.id) or ("",))[0] == app.name] for v in engine}
        runtime = {v: runtime_of([g for g in groups[v] if g.name.startswith(f"app:{app.name}:")]) for v in engine}
        checks.append(app_check(app, plan.app_reasons.get(app.name, ""), app.check_name in affected or app.name in affected,
                                mine, refs, runtime, params, profile, signals, drift))
    return checks


def make_checks(plan: Plan, runs: dict[str, WorkerRun], references: dict[str, WorkerRun],
                reference_eval: WorkerRun | None, id_map: dict[str, dict[str, str]], profile: dict[str, float],
                pytest_outcomes: dict | None, patch_text: str = "") -> list[CheckResult]:
    engine = {v: runs[v].results() for v in ("base", "patched")}
    refs = {}
    for v in engine:
        ref_by_id = {r.id: r for r in references[v].results()}
        refs[v] = {eid: ref_by_id[rid] for eid, rid in id_map[v].items() if rid in ref_by_id}
    prompts = {w.request_id(p): p for w in plan.workloads for p in w.prompts}
    affected = set(plan.symptom.affected) if plan.symptom and plan.symptom.affected else None
    is_affected = lambda name: affected is None or name in affected  # noqa: E731
    checks: list[CheckResult] = []
    app_checks = make_app_checks(plan, engine, refs, runs, profile)
    if plan.symptom is not None and plan.symptom.kind == "app":
        checks.append(app_symptom_check(plan.symptom, next(c for c in app_checks
                                                           if c.name == f"app/{plan.symptom.app}")))
    elif plan.symptom is not None:
        only = lambda results: [r for r in results if r.id.startswith(SYMPTOM + "#")]  # noqa: E731
        checks.append(symptom_check(plan.symptom, {v: only(engine[v]) for v in engine}, refs, prompts, profile,
                                    pytest_outcomes))
    for suite in plan.parity_suites():
        mine = {v: [r for r in engine[v] if r.id.startswith(suite.name + "#")] for v in engine}
        checks.append(parity_check(suite.name, "parity", mine, refs, profile, is_affected(suite.name),
                                   {k: p.text for k, p in prompts.items()}, suite.spec.get("description", "")))
    rows = {"base": samples_of(runs["base"]), "patched": samples_of(runs["patched"]),
            "reference": samples_of(reference_eval) if reference_eval else []}
    for suite in plan.accuracy_suites():
        metric = suite.spec["metric"]
        samples = {v: per_sample(rows[v], suite.name, metric) for v in rows}
        checks.append(accuracy_check(suite.name, metric, float(suite.spec.get("tolerance", 0.05)), samples,
                                     is_affected(suite.name), suite.spec.get("description", "")))
    checks += app_checks
    reported = [p.text for w in plan.workloads if w.name == SYMPTOM for p in w.prompts]
    checks.append(static_check(patch_text, reported))
    return checks


def validate(opts: ValidateOptions, progress: Progress) -> tuple[ValidationRun, Path]:
    t0 = time.time()
    started = datetime.now(timezone.utc)
    stages: dict[str, float] = {}

    def stage_done(name: str, since: float) -> None:
        stages[name] = round(time.time() - since, 2)
        progress(f"{name}: done in {stages[name]:.1f}s")

    # intake: every input checked before anything runs
    since = time.time()
    patch = patch_info(opts.patch)
    judges = judge_edits(patch)
    if judges and opts.refuse_judge_edits:
        raise InfercheckError(f"patch edits its own judges (tests / CI config: {', '.join(judges[:3])}), "
                              f"refused (--refuse-judge-edits)")
    base_patches = [patch_info(p) for p in opts.base_patches]
    model_dir = zoo.model_dir(opts.model)
    model_name = model_dir.name
    symptom: SymptomSpec | None = load_symptom(opts.symptom) if opts.symptom else None
    profile = tolerance_profile(opts.dtype)
    suites = select_suites(model_name, opts.suites)
    apps, app_reasons = choose_apps(list(patch.touched), opts.apps, symptom.app if symptom else None)
    stage_done("intake", since)

    since = time.time()
    plan = make_plan(str(model_dir), model_name, opts.dtype, suites, symptom, apps=apps, app_reasons=app_reasons,
                     model_dir=zoo.model_dir)
    progress(f"plan: {len(plan.workloads)} generation workload(s), {len(plan.accuracy_suites())} lm-eval suite(s): "
             f"{', '.join(s.name for s in suites)}; {len(apps)} app(s): {', '.join(a.name for a in apps) or 'none'}")
    stage_done("plan", since)

    device = detect_device()
    since = time.time()
    variants = build_variants(opts, device)  # a patch that does not apply stops here, before any output
    stage_done("build", since)
    out = report_folder(opts, started)
    stage_plan(plan, out / "inputs")
    from infercheck.resume import save_options  # resume imports this module

    save_options(opts, out / "inputs")

    engine = find_installed_engine()
    run = ValidationRun(out.name, patch, base_patches, model_name, opts.dtype, device,
                        f"{engine.distribution} {engine.version}", opts.command, started.isoformat(), 0.0, stages,
                        [], decide([], [], symptom is not None), opts.case, opts.expected)
    run_errors: list[Flag] = []
    checks: list[CheckResult] = []
    if variants.patched is None:
        run_errors.append(Flag("ERROR:build", None, variants.build_error or "build failed"))
    else:
        deadline = t0 + opts.run_timeout_s if opts.run_timeout_s else None
        checks, run_errors = run_and_check(plan, variants, opts, out, profile, progress, stages, deadline)
    if judges:  # kept whatever the headline: a reviewer must see it
        run_errors.append(Flag(EDITS_OWN_JUDGES, None, f"the patch edits its own judges: {', '.join(judges)} "
                                                        f"(engine tests / CI config); the verdict does not run them"))
    run.checks = checks
    run.containment = read_containment(out / "runs" / "patched")
    run.verdict = decide(checks, run_errors, symptom is not None, opts.fail_on)
    run.elapsed_s = round(time.time() - t0, 2)
    since = time.time()
    write_report(run, out)
    if out.parent == reports_dir():
        write_index(reports_dir())
    stage_done("report", since)
    return run, out


def read_containment(worker_dir: Path) -> dict:
    try:
        return json.loads((worker_dir / CONTAINMENT).read_text())
    except (OSError, ValueError):
        return {}


def run_and_check(plan: Plan, variants: Variants, opts: ValidateOptions, out: Path, profile: dict[str, float],
                  progress: Progress, stages: dict[str, float],
                  deadline: float | None = None) -> tuple[list[CheckResult], list[Flag]]:
    since = time.time()
    job = engine_job(plan)
    runs = {"base": run_variant(job, variants.base, out / "runs" / "base", opts, progress, deadline)}
    if not runs["base"].ok:
        return [], [Flag("ERROR:base", None, f"the unpatched base engine failed, nothing can be judged: "
                                              f"{runs['base'].error}")]
    runs["patched"] = run_variant(job, variants.patched, out / "runs" / "patched", opts, progress, deadline)
    if not runs["patched"].ok:
        return [], [Flag("ERROR:run", None, f"patched engine failed where base ran ({runs['patched'].error_kind}): "
                                             f"{runs['patched'].error}")]
    pytest_outcomes = None
    if plan.symptom is not None and plan.symptom.kind == "pytest":
        pytest_outcomes = {v: run_pytest(plan.symptom, env, out / "runs" / f"pytest-{v}", opts.timeout_s)
                           for v, env in (("base", variants.base), ("patched", variants.patched))}
    ref_env = replace(installed_env(detect_device()), name="reference")
    references, id_map = {}, {}
    for variant in ("base", "patched"):
        ref_job, id_map[variant] = reference_job(plan, runs[variant].results())
        references[variant] = run_variant(ref_job, replace(ref_env, name=f"reference-{variant}"),
                                          out / "runs" / f"reference-{variant}", opts, progress, deadline)
    eval_job = reference_eval_job(plan)
    reference_eval = None
    if eval_job is not None:
        reference_eval = run_variant(eval_job, replace(ref_env, name="reference-eval"), out / "runs" / "reference-eval",
                                     opts, progress, deadline)
    stages["run"] = round(time.time() - since, 2)
    for ref_run in (*references.values(), reference_eval):
        if ref_run is not None and not ref_run.ok:
            return [], [Flag("ERROR:reference", None, f"the HF reference failed: {ref_run.error}")]
    since = time.time()
    checks = make_checks(plan, runs, references, reference_eval, id_map, profile, pytest_outcomes,
                         read_patch(opts.patch).text)
    stages["checks"] = round(time.time() - since, 2)
    for check in checks:
        progress(f"check {check.name}: base {fmt(check.base.passed)}, patched {fmt(check.patched.passed)}"
                 f"{' [' + ', '.join(check.flags) + ']' if check.flags else ''}")
    return checks, []


def fmt(passed: bool | None) -> str:
    return {True: "pass", False: "FAIL", None: "n/a"}[passed]
