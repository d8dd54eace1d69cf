"""Stage 5, grade: stored worker results in, CheckResults and run-level flags out (docs/design.md,
"Pipeline"). Pure: no engine, no files — the run folder is read by `run.store.load_stored` before,
so `infercheck regrade RUN_DIR` redoes this stage (and verdict and report) from what a run left.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from infercheck.app_ids import app_of, bare_name
from infercheck.build.engine_environment import installed_engine_environment
from infercheck.checks.accuracy import accuracy_check, per_sample
from infercheck.checks.app_check import app_check
from infercheck.checks.code_path import code_path_check
from infercheck.checks.engine_tests import engine_tests_check
from infercheck.checks.noise_floor import FloorSettings, Tolerance, measure, tolerance
from infercheck.checks.parity_check import parity_check
from infercheck.checks.signals import machine_drift, runtime_of
from infercheck.checks.static_signals import static_check
from infercheck.prompts import source_texts
from infercheck.checks.symptom import NAME as SYMPTOM_CHECK
from infercheck.checks.symptom import app_symptom_check, symptom_check
from infercheck.engine_limits import Limitation
from infercheck.names import ENGINE_VARIANTS, CheckKind, Stage, SymptomKind, Variant, error_code
from infercheck.plan import ALONE, SYMPTOM, Plan, engine_job, group_checks, parity_workloads, reference_job
from infercheck.records import CheckResult, Flag
from infercheck.run.job import PYTEST_GROUP, RequestResult
from infercheck.run.store import FLOOR, REFERENCE_EVAL, StoredRun, pytest_folder, reference_worker


@dataclass
class Graded:
    checks: list[CheckResult] = field(default_factory=list)
    run_flags: list[Flag] = field(default_factory=list)  # ERROR:<stage> of a run that could not be judged


@dataclass(frozen=True)
class Settings:
    """What grading is judged against: the dtype's tolerances, the workaround-signal settings and how
    parity thresholds follow from a measured noise floor (None: the table alone)."""

    profile: dict[str, float]
    signals: dict[str, float]
    floor: FloorSettings | None = None
    base_unmodified: bool = True  # base is the unmodified engine (no base patches)
    limitations: tuple[Limitation, ...] = ()  # the engine's known limitations (suites/engine_limits.yaml)


def run_errors(stored: StoredRun) -> list[Flag]:
    """Why nothing can be judged, if so: a build that failed, an engine or reference that failed."""
    outcome = stored.outcome
    if outcome.build_error is not None:
        return [Flag(error_code(Stage.BUILD), None, outcome.build_error)]
    base, patched = outcome.workers.get(Variant.BASE), outcome.workers.get(Variant.PATCHED)
    if base is None or not base.ok:
        why = base.error if base else "it did not run"
        return [Flag(error_code(Stage.BASE), None, f"the unpatched base engine failed, nothing can be judged: {why}")]
    if patched is None or not patched.ok:
        kind, why = (patched.error_kind, patched.error) if patched else ("missing", "it did not run")
        return [Flag(error_code(Stage.RUN), None, f"patched engine failed where base ran ({kind}): {why}")]
    for name in (*(reference_worker(v) for v in ENGINE_VARIANTS), REFERENCE_EVAL):
        ref = outcome.workers.get(name)
        if (ref is None and name != REFERENCE_EVAL) or (ref is not None and not ref.ok):
            return [Flag(error_code(Stage.REFERENCE), None,
                         f"the HF reference failed: {ref.error if ref else 'it did not run'}")]
    return []


def scored(plan: Plan, stored: StoredRun, worker: str, results: list[RequestResult]) -> dict[str, RequestResult]:
    """Engine request id -> the stored scoring of it by the reference worker `worker` (ids
    re-derived from the plan, as the run stage derived them)."""
    _, id_map = reference_job(plan, results)
    by_id = {r.id: r for r in stored.of(worker).results}
    return {eid: by_id[rid] for eid, rid in id_map.items() if rid in by_id}


def reference_rows(plan: Plan, stored: StoredRun, engine: dict[Variant, list[RequestResult]]
                   ) -> dict[Variant, dict[str, RequestResult]]:
    """variant -> engine request id -> the reference's scoring of it."""
    return {v: scored(plan, stored, reference_worker(v), engine[v]) for v in ENGINE_VARIANTS}


def app_checks(plan: Plan, stored: StoredRun, engine: dict[Variant, list[RequestResult]],
               refs: dict[Variant, dict[str, RequestResult]], settings: Settings) -> list[CheckResult]:
    affected = set(plan.symptom.affected) | {plan.symptom.app or ""} if plan.symptom else set()
    params = plan.sampling_params()
    groups = {v: stored.of(v).groups for v in ENGINE_VARIANTS}
    drift = machine_drift(groups[Variant.BASE], groups[Variant.PATCHED])
    checks = []
    for app in plan.apps:
        mine = {v: [r for r in engine[v] if app_of(r.id) == app.name] for v in ENGINE_VARIANTS}
        runtime = {v: runtime_of([g for g in groups[v] if g.name.startswith(f"app:{app.name}:")])
                   for v in ENGINE_VARIANTS}
        checks.append(app_check(app, plan.app_reasons.get(app.name, ""),
                                app.check_name in affected or app.name in affected, mine, refs, runtime, params,
                                settings.profile, settings.signals, drift, plan.draw, settings.base_unmodified,
                                settings.limitations))
    return checks


def grade(plan: Plan, stored: StoredRun, settings: Settings, patch_text: str) -> Graded:
    """Every check of the plan over the stored results; the static check always, on the patch text."""
    errors = run_errors(stored)
    if errors:
        return Graded([], errors)
    engine = {v: stored.of(v).results for v in ENGINE_VARIANTS}
    refs = reference_rows(plan, stored, engine)
    prompts = plan.prompts()
    texts = {k: p.text for k, p in prompts.items()}
    affected = set(plan.symptom.affected) if plan.symptom and plan.symptom.affected else None
    is_affected = lambda name: affected is None or name in affected  # noqa: E731
    checks: list[CheckResult] = []
    tolerances = floor_tolerances(plan, stored, settings)
    table = tolerance(settings.profile, None, settings.floor)  # a symptom judged without parity
    apps = app_checks(plan, stored, engine, refs, settings)
    symptom = plan.symptom
    if symptom is not None and symptom.kind == SymptomKind.APP:
        checks.append(app_symptom_check(symptom, next(c for c in apps if bare_name(c.name) == symptom.app)))
    elif symptom is not None:
        only = {v: [r for r in engine[v] if r.id.startswith(SYMPTOM + "#")] for v in ENGINE_VARIANTS}
        pytest = {Variant(v): o for v, o in stored.outcome.pytest.items()}
        checks.append(symptom_check(symptom, only, refs, prompts, tolerances.get(SYMPTOM, table), pytest))
    for suite in plan.parity_suites():
        mine = {v: [r for r in engine[v] if r.id.startswith(suite.name + "#")] for v in ENGINE_VARIANTS}
        checks.append(parity_check(suite.name, CheckKind.PARITY, mine, refs, tolerances[suite.name],
                                   is_affected(suite.name), texts, suite.description))
    rows = {Variant.BASE: stored.of(Variant.BASE).lm_eval, Variant.PATCHED: stored.of(Variant.PATCHED).lm_eval,
            Variant.REFERENCE: stored.of(REFERENCE_EVAL).lm_eval}
    for suite in plan.accuracy_suites():
        samples = {v: per_sample(rows[v], suite.name, suite.metric) for v in Variant}
        checks.append(accuracy_check(suite.name, suite.metric, suite.tolerance, samples, is_affected(suite.name),
                                     suite.description))
    checks += apps
    checks.append(static_check(patch_text, plan.reported_prompts(), installed_engine_environment(),
                               [*sorted(texts.values()), *source_texts()]))
    code_path = traced_code_path(plan, stored, repaired_checks(checks))
    if code_path is not None:
        checks.append(code_path)
    outcome = stored.outcome
    if outcome.engine_tests or outcome.engine_tests_note:  # a run from before engine tests has neither
        checks.append(engine_tests_check(stored.engine_test_selection, outcome.engine_tests, stored.engine_tests,
                                         outcome.engine_tests_note))
    return Graded(checks, [])


def floor_tolerances(plan: Plan, stored: StoredRun, settings: Settings) -> dict[str, Tolerance]:
    """Parity workload -> the tolerance its check is judged against (checks/noise_floor.py), from the
    floor run's stored rows; where there is no floor, why, in each tolerance's note."""
    side = floor_batched_side(stored)
    floor, scoring = stored.outcome.workers.get(FLOOR), stored.outcome.workers.get(reference_worker(side))
    missing = ("no floor run recorded (--no-floor, or a run from before the noise floor)" if floor is None
               else f"the floor run failed ({floor.error})" if not floor.ok
               else "the floor's reference scoring did not run" if scoring is None
               else f"the floor's reference scoring failed ({scoring.error})" if not scoring.ok else "")
    results = stored.of(FLOOR).results if not missing else []
    batched = [r for r in stored.of(side).results if not r.group.endswith(ALONE)] if not missing else []
    alone = [replace(r, id=r.id.removesuffix(ALONE)) for r in results if r.group.endswith(ALONE)]
    refs = scored(plan, stored, reference_worker(side), batched) if batched else {}
    out = {}
    for name in parity_workloads(plan):
        of = lambda rows: [r for r in rows if r.id.startswith(name + "#")]  # noqa: E731
        measured = measure(name, of(batched), of(alone), refs, settings.profile["near_tie"]) if not missing else None
        out[name] = tolerance(settings.profile, measured, settings.floor,
                              missing or "the floor run holds no comparable positions of this workload")
    return out


def floor_batched_side(stored: StoredRun) -> str:
    """The worker whose rows are the floor's batched composition: the floor's own, or base's where
    the floor ran the alone groups only (base is the unmodified engine; execute.run_floor)."""
    job = stored.of(FLOOR).job
    alone_only = job is not None and bool(job.groups) and all(g.name.endswith(ALONE) for g in job.groups)
    return Variant.BASE if alone_only else FLOOR


def repaired_checks(checks: list[CheckResult]) -> frozenset[str]:
    """The checks that fail on base and pass on patched."""
    return frozenset(c.name for c in checks if c.base is not None and c.patched is not None
                     and c.base.passed is False and c.patched.passed is True)


def traced_code_path(plan: Plan, stored: StoredRun, repaired: frozenset[str] = frozenset()) -> CheckResult | None:
    """The code-path check over what the engine groups and the pytest symptom's runs recorded;
    repaired: the checks the patch turned from failing to passing."""
    if not plan.trace:
        return None
    ran_job = stored.of(Variant.BASE).job  # what the workers ran: the plan rebuilt later lacks its staged lm-eval tasks
    groups = {**group_checks(ran_job or engine_job(plan)), PYTEST_GROUP: [SYMPTOM_CHECK]}
    traces, sources, ran = {}, {}, {}
    for v in ENGINE_VARIANTS:
        engine, pytest = stored.of(v), stored.of(pytest_folder(v))
        traces[v] = None if engine.trace is None else {**engine.trace, **(pytest.trace or {})}
        sources[v] = {**pytest.sources, **engine.sources}
        ran[v] = engine.finished_groups() | ({PYTEST_GROUP} if pytest.trace is not None else set())
    return code_path_check(plan.trace, groups, traces, sources, ran, repaired)
