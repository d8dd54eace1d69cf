"""Run a symptom's pytest node id in a variant's engine env (FAIL_TO_PASS, as SWE-bench does), held
like a worker (docs/design.md, "What a worker sees"): the same containment (run/sandbox.py) and,
where the platform allows one, a view of its own (run/view.py) holding the engine, the test's own
folder and the model zoo, and nothing of the judges."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from infercheck.build.engine_env import EngineEnv
from infercheck.device import detect_device
from infercheck.paths import MODELS_DIR, REPO_ROOT, cache_dir
from infercheck.run.job import Job, STDERR, STDOUT
from infercheck.run.launcher import CONTAINMENT, HARNESS_CODE, covered_folders, run_contained
from infercheck.run import engine_state
from infercheck.run.sandbox import namespaces_refused, plan_containment, private_environ, wrap_command
from infercheck.run.store import PytestOutcome
from infercheck.run.view import WorkerView, neutral_environ, plan_view
from infercheck.specs import SymptomSpec

PYTEST_LOG = "pytest.log"
JUNIT = "junit.xml"  # pytest's per-test report, in the run's folder
TAIL_LINES = 8


def symptom_binds(spec: SymptomSpec) -> tuple[tuple[tuple[str, str], ...], str] | str:
    """What a pytest symptom sees beside the engine, as (host path, place under the view's root)
    pairs, and its working folder's place; or why it cannot have a view. The test file's folder (and
    a conftest.py beside the symptom spec) keep the places they have in the repository, under
    `repo/`, with the model zoo at `repo/suites/models` (a bundled test finds its model relative to
    itself); a symptom outside the repository sits under `symptom/`."""
    folder = Path(spec.path).resolve().parent
    test_dir = (folder / str(spec.pytest).split("::")[0]).resolve().parent
    anchor, top = (REPO_ROOT, PurePosixPath("repo")) if folder.is_relative_to(REPO_ROOT) else (folder, PurePosixPath("symptom"))
    if not test_dir.is_relative_to(anchor):
        return f"the test file lies outside {anchor}"
    place = lambda path: str(top / path.relative_to(anchor))  # noqa: E731
    binds = [(str(test_dir), place(test_dir))]
    if (folder / "conftest.py").is_file() and folder != test_dir:
        binds.append((str(folder / "conftest.py"), place(folder / "conftest.py")))
    if anchor == REPO_ROOT:
        binds.append((str(MODELS_DIR), place(MODELS_DIR)))
    return tuple(binds), place(folder)


@dataclass(frozen=True)
class PytestPlace:
    """Where a contained pytest run works and what it sees beside the engine: host folders or files
    with their places under the view's root, its working folder's place there, and its working
    folder on the host where no view can be made (or why none can)."""

    binds: tuple[tuple[str, str], ...]
    cwd: str
    host_cwd: Path
    no_view: str | None = None


def symptom_place(spec: SymptomSpec) -> PytestPlace:
    planned = symptom_binds(spec)
    host_cwd = Path(spec.path).resolve().parent
    if isinstance(planned, str):
        return PytestPlace((), "", host_cwd, planned)
    return PytestPlace(planned[0], planned[1], host_cwd)


def pytest_view(place: PytestPlace, env: EngineEnv, out_dir: Path, environ: dict[str, str]) -> WorkerView | str:
    """The pytest run's view, or why it gets none."""
    refused = namespaces_refused() or place.no_view
    if refused is not None:
        return refused
    view = plan_view(Job("vllm", "", "float32", []), env.python, env.pythonpath, HARNESS_CODE, environ.get("HF_HOME"),
                     out_dir, covered_folders(out_dir), place.binds)
    return view if isinstance(view, str) else replace(view, cwd=f"{view.root}/{place.cwd}")


def run_pytest_contained(place: PytestPlace, env: EngineEnv, out_dir: Path, timeout_s: float, pytest_args: list[str],
                         trace: list[str] | None = None) -> tuple[int | None, str]:
    """pytest with `pytest_args` in a variant's engine env, held like a worker; pytest writes its
    per-test report to JUNIT in out_dir. Returns (exit status, None past timeout_s; the log)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / JUNIT).unlink(missing_ok=True)
    containment = replace(plan_containment(detect_device(), timeout_s, [REPO_ROOT, cache_dir()], needs_network=False),
                          cpus=env.cpus)
    environ = private_environ(env.environ(), out_dir)
    engine_state.seed(out_dir)
    view = pytest_view(place, env, out_dir, environ)
    if isinstance(view, WorkerView):
        args = ["--", "-q", "-p", "no:cacheprovider", f"--junitxml={view.out_dir()}/{JUNIT}", *pytest_args]
        containment = replace(containment, view=view.as_record(), notes=(*containment.notes, *view.notes))
        traced = [view.path(t) if os.path.isabs(t) else t for t in trace or []]
        cmd = wrap_command([view.python, f"{view.root}/bin/test.py", "--out", view.out_dir(), "--trace", *traced,
                            *args], out_dir, containment, view.sandbox_args())
        cwd = out_dir
    else:
        args = ["--", "-q", "-p", "no:cacheprovider", f"--junitxml={out_dir.resolve()}/{JUNIT}", *pytest_args]
        containment = replace(containment, notes=(*containment.notes, f"no view of its own ({view}): the test "
                                                  "sees the host's paths"))
        cmd = wrap_command([env.python, "-m", "infercheck.run.traced_pytest", "--out", str(out_dir.resolve()),
                            "--trace", *(trace or []), *args], out_dir, containment)
        cwd = place.host_cwd
    environ = neutral_environ(environ, view if isinstance(view, WorkerView) else None)
    try:
        returncode = run_contained(cmd, environ, out_dir, containment, timeout_s, cwd=cwd)
    finally:
        (out_dir / CONTAINMENT).write_text(json.dumps(containment.as_record()))
    engine_state.keep(env.name, out_dir)
    log = "".join((out_dir / name).read_text(errors="replace") for name in (STDOUT, STDERR) if (out_dir / name).is_file())
    (out_dir / PYTEST_LOG).write_text(log)
    return returncode, log


def run_pytest(spec: SymptomSpec, env: EngineEnv, out_dir: Path, timeout_s: float,
               trace: list[str] | None = None) -> PytestOutcome:
    """The node id is relative to the symptom file's folder; the full log lands in out_dir. With
    `trace` (engine files), the run is traced like a worker's group (run/traced_pytest.py)."""
    returncode, log = run_pytest_contained(symptom_place(spec), env, out_dir, timeout_s, [str(spec.pytest)], trace)
    if returncode is None:
        return PytestOutcome(False, None, f"timed out after {timeout_s:g}s")
    tail = "\n".join(log.strip().splitlines()[-TAIL_LINES:])
    return PytestOutcome(returncode == 0, returncode, tail)
