"""`infercheck codemap build`: record the code map (infercheck/codemap.py) of the installed engine.

One worker on the clean installed engine runs the baseline (the smoke parity suite on the default
model) and every app and oracle, each on engines of its own, with coverage over the whole engine
package, one context per group; the lines are mapped to functions with the installed sources and
stored as suites/codemap/<distribution>-<version>.json. Slow (tens of minutes on two cores): it is
rebuilt when the engine version or an app's definition changes, never in a validate.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from infercheck.apps import FOLDERS, load_apps
from infercheck.build.engine_env import installed_env
from infercheck.build.tree import find_installed_engine
from infercheck.codemap import CodeMap, codemap_path, definition_digest, lines_by_check, load_codemap, record_codemap
from infercheck.console import Progress
from infercheck.device import detect_device
from infercheck.engine_limits import limitations_for, matching
from infercheck.errors import InfercheckError
from infercheck.models import zoo
from infercheck.paths import SUITES_DIR
from infercheck.plan import engine_job, group_checks, make_plan
from infercheck.run.job import ENGINE_PACKAGE, JOB_FILE, TRACE, Job
from infercheck.run.launcher import WorkerRun, classify, launch
from infercheck.specs import App
from infercheck.suites import select_suites

BASELINE_MODEL = "tiny-llama-add"
BASELINE_SUITES = ["parity/addition-short"]


def app_digests(apps: dict[str, App], root: Path = SUITES_DIR) -> dict[str, str]:
    """App name -> the digest of its suite file (what a stored map was recorded with); a model
    variant's is its app's file."""
    return {name: definition_digest(root / FOLDERS[app.kind] / f"{app.variant_of or name}.yaml")
            for name, app in apps.items()}


def engine_sources(package_dir: Path, files: set[str]) -> dict[str, str]:
    """"vllm/x.py" -> its text in the installed package (package_dir is .../vllm)."""
    out = {}
    for file in files:
        path = package_dir.parent / file
        if path.is_file():
            out[file] = path.read_text()
    return out


def build_codemap(work_dir: Path, timeout_s: float, progress: Progress, out: Path | None = None,
                  reuse: bool = False, add: bool = False) -> tuple[CodeMap, Path]:
    """Run (or, with reuse, read a finished run of the same job in work_dir) and record the map; with
    add, run only the apps the stored map lacks or has stale (added_trace)."""
    engine = find_installed_engine()
    apps = load_apps()
    model = zoo.model_dir(BASELINE_MODEL)
    plan = make_plan(str(model), BASELINE_MODEL, "float32", select_suites(BASELINE_MODEL, BASELINE_SUITES), None,
                     apps=list(apps.values()), model_dir=zoo.model_dir)
    plan.trace = [ENGINE_PACKAGE]  # the whole package, named "vllm/..." by the worker's tracer
    job = engine_job(plan)
    path = out or codemap_path(engine.distribution, engine.version)
    if add:
        trace, run = added_trace(job, apps, load_codemap(path), work_dir, timeout_s, progress)
    else:
        progress(f"codemap: {len(job.groups)} engine group(s) on {engine.distribution} {engine.version}, "
                 f"coverage over {engine.package_dir}")
        if reuse and (work_dir / JOB_FILE).is_file() and Job.load(work_dir / JOB_FILE) == job:
            progress(f"codemap: reusing the finished run in {work_dir}")
            run = classify(installed_env(detect_device()).name, work_dir, 0, 0.0, timeout_s)
        else:
            run = launch(job, installed_env(detect_device()), work_dir, timeout_s)
        run.raise_for_error()
        trace = json.loads((work_dir / TRACE).read_text())
    checks = group_checks(job)
    limits = limitations_for(engine.version, detect_device())
    failed: set[str] = set()
    for group in (g for g in run.groups() if g.error):
        if limit := matching(group.error, limits):
            progress(f"codemap: {group.name} stopped at this build's known limitation {limit.id}; "
                     f"its reach is what it ran before")
        else:
            failed.update(checks.get(group.name, []))
    if failed:
        raise InfercheckError(f"codemap: groups of {', '.join(sorted(failed))} failed on the clean engine; "
                              f"not recorded")
    files = {f for group in trace.values() for f in group}
    codemap = record_codemap(f"{engine.distribution} {engine.version}", lines_by_check(trace, checks),
                             engine_sources(engine.package_dir, files), BASELINE_SUITES,
                             {app.check_name: name for name, app in apps.items()}, app_digests(apps))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(codemap.to_json())
    tmp.replace(path)
    return codemap, path


ADDED = "added"  # the subfolder of --work an added run writes


def added_trace(job: Job, apps: dict[str, App], stored: CodeMap | None, work_dir: Path, timeout_s: float,
                progress: Progress) -> tuple[dict[str, Any], WorkerRun]:
    """Run only the apps the stored map lacks or records from another definition, and merge their
    trace into the finished full run's in work_dir (an app's reach is read against every app's
    lines, so the others' lines must be there). The added job starts with the baseline group, so
    each added app's engine starts after another's shut down, as in the full run."""
    if not (work_dir / JOB_FILE).is_file() or not (work_dir / TRACE).is_file():
        raise InfercheckError(f"codemap --add needs the finished full run in {work_dir} "
                              f"(run `infercheck codemap build` once, or name it with --work)")
    stale = set(stored.stale(app_digests(apps)) if stored else apps)
    checks = group_checks(job)
    app_checks = {a.check_name for a in apps.values()}
    stale_checks = {apps[n].check_name for n in stale}
    baseline = [g for g in job.groups if not app_checks & set(checks[g.name])]
    added = [g for g in job.groups if stale_checks & set(checks[g.name])]
    if not added:
        raise InfercheckError("codemap --add: the stored map is current for every app; nothing to add")
    progress(f"codemap: adding {', '.join(sorted(stale))} ({len(added)} engine group(s)) to the run in {work_dir}")
    run = launch(replace(job, groups=[*baseline, *added]), installed_env(detect_device()), work_dir / ADDED,
                 timeout_s)
    run.raise_for_error()
    fresh = json.loads((work_dir / ADDED / TRACE).read_text())
    previous = json.loads((work_dir / TRACE).read_text())
    return merged_trace(previous, fresh, [g.name for g in job.groups], [g.name for g in added]), run


def merged_trace(previous: dict[str, Any], fresh: dict[str, Any], groups: list[str],
                 added: list[str]) -> dict[str, Any]:
    """The full run's trace with the added groups' lines from the added run: groups no longer in
    the job dropped, an added group's old lines replaced (none where it ran nothing)."""
    merged = {g: lines for g, lines in previous.items() if g in groups and g not in added}
    merged.update({g: fresh.get(g, {}) for g in added})
    return merged
