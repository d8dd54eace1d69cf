"""A run's time breakdown (infercheck/timing.py) from its stored rows: pure, like the grade stage
(docs/design.md, "Where the time goes").

Each worker's parts come from its group rows (imports, engine construction, generation or scoring,
lm-eval: GroupResult) and its own clock (the interpreter's start-up: WorkerTiming); its wall is the
harness's (WorkerOutcome.wall_s). Reused groups count apart, in `reused_s`.
"""

from __future__ import annotations

from dataclasses import replace

from infercheck.names import Variant
from infercheck.run.job import GroupResult
from infercheck.run.store import PytestOutcome, StoredRun, WorkerOutcome, WorkerRows, pytest_folder
from infercheck.timing import GroupTime, Seconds, TimeBreakdown, WorkerRole, WorkerTime


def group_times(rows: list[GroupResult], reused_groups: int) -> list[GroupTime]:
    """Each group row's times. A reused row is marked (run/cache.py); in rows stored before the mark,
    the cached groups are the last `reused_groups` rows (launch_cached adds them after the worker's)."""
    first_cached = len(rows) - reused_groups
    return [GroupTime(row.name, row.import_s, row.startup_s, row.elapsed_s, row.lm_eval_s,
                      row.reused or i >= first_cached) for i, row in enumerate(rows)]


def role_of(worker: str) -> WorkerRole:
    """The harness names the reference's workers reference-<variant> and reference-eval."""
    return WorkerRole.REFERENCE if worker.startswith(Variant.REFERENCE) else WorkerRole.ENGINE


def worker_time(worker: str, outcome: WorkerOutcome, rows: WorkerRows) -> WorkerTime:
    role = role_of(worker)
    groups = group_times(rows.groups, outcome.reused_groups)
    fresh = [g for g in groups if not g.reused]
    work = sum(g.work_s for g in fresh)
    boot = rows.timing.boot_s if rows.timing is not None else 0.0
    parts = Seconds(wall_s=outcome.wall_s or outcome.elapsed_s,  # runs before wall_s: the subprocess alone
                    import_s=boot + sum(g.import_s for g in fresh),
                    engine_start_s=sum(g.engine_start_s for g in fresh),
                    generation_s=work if role == WorkerRole.ENGINE else 0.0,
                    scoring_s=work if role == WorkerRole.REFERENCE else 0.0,
                    lm_eval_s=sum(g.lm_eval_s for g in fresh),
                    reused_s=sum(g.total_s for g in groups if g.reused))
    return WorkerTime(worker, role, with_other(parts), rows.timing.wall_s if rows.timing is not None else 0.0, groups)


def with_other(parts: Seconds) -> Seconds:
    """The parts rounded, and `other_s`: what the wall holds beyond them (never below 0: a worker's
    clock and the harness's may differ by a tick)."""
    accounted = parts.import_s + parts.engine_start_s + parts.generation_s + parts.scoring_s + parts.lm_eval_s
    return replace(parts, other_s=max(0.0, parts.wall_s - accounted)).rounded()


def pytest_time(variant: str, outcome: PytestOutcome) -> WorkerTime:
    """A pytest symptom run: its wall only (the test drives the engine itself)."""
    return WorkerTime(pytest_folder(variant), WorkerRole.PYTEST, Seconds(wall_s=outcome.wall_s, other_s=outcome.wall_s),
                      groups=[GroupTime("pytest", reused=outcome.reused)])


def time_breakdown(stored: StoredRun) -> TimeBreakdown:
    """Every worker of the run, in the order they ran, then the pytest symptom's runs."""
    workers = [worker_time(name, outcome, stored.of(name)) for name, outcome in stored.outcome.workers.items()]
    workers += [pytest_time(variant, outcome) for variant, outcome in stored.outcome.pytest.items()]
    return TimeBreakdown(workers)
