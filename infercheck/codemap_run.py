"""`infercheck codemap build`: record the code map (infercheck/codemap.py) of the installed engine.

One worker on the clean installed engine runs the baseline (the smoke parity suite on the default
model) and every app and oracle, each on engines of its own, with coverage over the whole engine
package, one context per group; the lines are mapped to functions with the installed sources and
stored as suites/codemap/<distribution>-<version>.json. Slow (tens of minutes on two cores): it is
rebuilt when the engine version or an app's definition changes, never in a validate.
"""

from __future__ import annotations

import json
from pathlib import Path

from infercheck.apps import FOLDERS, load_apps
from infercheck.build.engine_env import installed_env
from infercheck.build.tree import find_installed_engine
from infercheck.codemap import CodeMap, codemap_path, definition_digest, lines_by_check, record_codemap
from infercheck.console import Progress
from infercheck.device import detect_device
from infercheck.errors import InfercheckError
from infercheck.models import zoo
from infercheck.paths import SUITES_DIR
from infercheck.plan import engine_job, group_checks, make_plan
from infercheck.run.job import ENGINE_PACKAGE, JOB_FILE, TRACE, Job
from infercheck.run.launcher import classify, launch
from infercheck.specs import App
from infercheck.suites import select_suites

BASELINE_MODEL = "tiny-llama-add"
BASELINE_SUITES = ["parity/addition-short"]


def app_digests(apps: dict[str, App], root: Path = SUITES_DIR) -> dict[str, str]:
    """App name -> the digest of its suite file (what a stored map was recorded with)."""
    return {name: definition_digest(root / FOLDERS[app.kind] / f"{name}.yaml") for name, app in apps.items()}


def engine_sources(package_dir: Path, files: set[str]) -> dict[str, str]:
    """"vllm/x.py" -> its text in the installed package (package_dir is .../vllm)."""
    out = {}
    for file in files:
        path = package_dir.parent / file
        if path.is_file():
            out[file] = path.read_text()
    return out


def build_codemap(work_dir: Path, timeout_s: float, progress: Progress, out: Path | None = None,
                  reuse: bool = False) -> tuple[CodeMap, Path]:
    """Run (or, with reuse, read a finished run of the same job in work_dir) and record the map."""
    engine = find_installed_engine()
    apps = load_apps()
    model = zoo.model_dir(BASELINE_MODEL)
    plan = make_plan(str(model), BASELINE_MODEL, "float32", select_suites(BASELINE_MODEL, BASELINE_SUITES), None,
                     apps=list(apps.values()), model_dir=zoo.model_dir)
    plan.trace = [ENGINE_PACKAGE]  # the whole package, named "vllm/..." by the worker's tracer
    job = engine_job(plan)
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
    failed = sorted({c for g in run.groups() if g.error for c in checks.get(g.name, [])})
    if failed:
        raise InfercheckError(f"codemap: groups of {', '.join(failed)} failed on the clean engine; not recorded")
    files = {f for group in trace.values() for f in group}
    codemap = record_codemap(f"{engine.distribution} {engine.version}", lines_by_check(trace, checks),
                             engine_sources(engine.package_dir, files), BASELINE_SUITES,
                             {app.check_name: name for name, app in apps.items()}, app_digests(apps))
    path = out or codemap_path(engine.distribution, engine.version)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(codemap.to_json())
    tmp.replace(path)
    return codemap, path
