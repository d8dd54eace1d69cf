"""A worker's view (run/view.py): what it binds, what it hides, the neutral job and environment, and
(where namespaces work) the sandbox wrapper carrying a view out. No engine: the view is paths."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from infercheck.run import view as view_module
from infercheck.run.job import Group, Job, LmEvalTask, Request
from infercheck.run.launcher import HARNESS_CODE
from infercheck.run.sandbox import SANDBOX_SCRIPT, namespaces_refused, user_flag
from infercheck.run.view import WorkerView, neutral_environ, plan_view, view_job


def layout(tmp_path: Path) -> dict[str, Path]:
    """A venv, an overlay with its build record, a model, a task folder, a cache with a stored result
    and a run folder with a sibling variant's outputs."""
    p = {name: tmp_path / name for name in ("venv", "cache", "repo", "tasks")}
    (p["venv"] / "bin").mkdir(parents=True)
    (p["venv"] / "pyvenv.cfg").write_text("home = /usr/bin\n")
    os.symlink(os.path.realpath(sys.executable), p["venv"] / "bin" / "python")
    p["overlay"] = p["cache"] / "builds" / "overlay-1"
    (p["overlay"] / "vllm").mkdir(parents=True)
    (p["overlay"] / "overlay.json").write_text('{"installed": "/host/path"}')
    (p["cache"] / "groups" / "k1").mkdir(parents=True)
    (p["cache"] / "groups" / "k1" / "results.jsonl").write_text("the reference's answers\n")
    p["model"] = p["repo"] / "suites" / "models" / "tiny-llama"
    p["model"].mkdir(parents=True)
    (p["model"] / "config.json").write_text("{}")
    p["tasks"].mkdir()
    p["run"] = tmp_path / "reports" / "run-1"
    p["out"] = p["run"] / "runs" / "patched"
    p["out"].mkdir(parents=True)
    (p["run"] / "runs" / "reference-base").mkdir()
    (p["run"] / "runs" / "reference-base" / "results.jsonl").write_text("reference outputs\n")
    return p


def a_job(p: dict[str, Path]) -> Job:
    group = Group("g0", {}, [Request(id="r0", prompt="1+1=")],
                  lm_eval=[LmEvalTask("addition_sums", "accuracy/x", str(p["tasks"]))])
    return Job("vllm", str(p["model"]), "float32", [group], trace=["vllm/v1/sample/sampler.py"])


def plan(p: dict[str, Path], *more_covered: Path) -> WorkerView:
    view = plan_view(a_job(p), str(p["venv"] / "bin" / "python"), (str(p["overlay"]),), HARNESS_CODE, None,
                     p["out"], [p["repo"], p["cache"], p["run"], *more_covered])
    assert isinstance(view, WorkerView), view
    return view


def test_the_view_binds_the_workers_inputs_under_neutral_names_and_covers_the_judges(tmp_path):
    p = layout(tmp_path)
    view = plan(p)
    root = view.root
    assert root in view_module.VIEW_ROOTS
    assert view.path(p["model"]) == f"{root}/models/tiny-llama"
    assert view.path(p["out"] / "job.json") == f"{root}/run/job.json" and view.out_dir() == f"{root}/run"
    assert [b.target for b in view.binds if b.writable] == [f"{root}/run"]  # the one writable place
    assert view.python == f"{root}/env/bin/python"
    assert view.path(p["overlay"] / "vllm" / "sampler.py") == f"{root}/engine0/vllm/sampler.py"
    assert not any(b.source.endswith("overlay.json") for b in view.binds)  # build records name host paths
    assert view.pythonpath == (f"{root}/engine0", f"{root}/lib")
    assert set(view.masks) == {str(p["repo"]), str(p["cache"]), str(p["run"])}
    assert view.hidden(str(p["cache"] / "groups" / "k1" / "results.jsonl"))
    assert view.hidden(str(p["run"] / "runs" / "reference-base" / "results.jsonl"))
    for bind in view.binds:
        assert "infercheck" not in bind.target.replace(f"{root}/lib/infercheck", ""), bind  # only the package name
    assert view.sandbox_args()[:5] == [root, "bind", "ro", str(p["venv"]), f"{root}/env"]


def test_the_workers_job_names_view_paths_only(tmp_path):
    p = layout(tmp_path)
    view = plan(p)
    job = view_job(a_job(p), view)
    assert job.model == f"{view.root}/models/tiny-llama"
    assert job.groups[0].lm_eval[0].include_path == f"{view.root}/tasks0"
    assert job.trace == ["vllm/v1/sample/sampler.py"]  # engine-relative: the same in every view
    assert str(tmp_path) not in job.to_json()
    hub = view_job(Job("vllm", "org/model", "float32", []), view)
    assert hub.model == "org/model"  # a hub id is not a path


def test_the_workers_environment_names_nothing_of_the_harness(tmp_path):
    p = layout(tmp_path)
    view = plan(p)
    environ = {"INFERCHECK_CACHE": str(p["cache"]), "HOME": str(p["out"] / "home"), "LANG": "C.UTF-8",
               "PATH": f"{p['venv']}/bin:{p['repo']}/bin:/usr/bin:/opt/infercheck-tools/bin",
               "RESULTS_HINT": str(p["cache"] / "groups"), "PYTHONPATH": f"{p['overlay']}:{p['repo']}",
               "VIRTUAL_ENV": str(p["venv"]), "NOTE": "run by infercheck", "OMP_NUM_THREADS": "2"}
    env = neutral_environ(environ, view)
    root = view.root
    assert env["HOME"] == f"{root}/run/home" and env["VIRTUAL_ENV"] == f"{root}/env"
    assert env["PATH"] == f"{root}/env/bin:/usr/bin"  # hidden and harness-named entries dropped
    assert env["PYTHONPATH"] == f"{root}/engine0:{root}/lib" and env["PWD"] == f"{root}/run"
    assert "RESULTS_HINT" not in env and "NOTE" not in env and "INFERCHECK_CACHE" not in env
    assert env["LANG"] == "C.UTF-8" and env["OMP_NUM_THREADS"] == "2"
    assert not any("infercheck" in v.lower() or str(tmp_path) in v for v in env.values())
    plain = neutral_environ(environ, None)  # no view: host paths stay, the harness's own variables go
    assert "INFERCHECK_CACHE" not in plain and plain["PYTHONPATH"] == environ["PYTHONPATH"]


def test_a_folder_holding_the_interpreter_stays_visible_and_no_root_means_no_view(tmp_path, monkeypatch):
    p = layout(tmp_path)
    python_home = Path(os.path.realpath(sys.executable)).parent
    view = plan_view(a_job(p), str(p["venv"] / "bin" / "python"), (), HARNESS_CODE, None, p["out"],
                     [python_home, p["cache"]])
    assert isinstance(view, WorkerView) and view.masks == (str(p["cache"]),)
    assert any(str(python_home) in note for note in view.notes)
    monkeypatch.setattr(view_module, "VIEW_ROOTS", (str(tmp_path),))  # the only root holds the inputs
    refused = plan_view(a_job(p), str(p["venv"] / "bin" / "python"), (), HARNESS_CODE, None, p["out"], [])
    assert isinstance(refused, str) and "no neutral root" in refused


@pytest.mark.skipif(namespaces_refused() is not None, reason=f"namespaces refused here: {namespaces_refused()}")
def test_the_sandbox_wrapper_carries_the_view_out(tmp_path):
    """The real wrapper in real namespaces, a shell in place of the worker: it reads its model and
    writes its run folder at their view paths, and finds neither the cache's stored result nor the
    sibling variant's outputs nor the overlay's build record."""
    p = layout(tmp_path)
    view = plan(p, Path("/tmp"))  # everything here lies under /tmp: covered by the worker's own scratch /tmp
    assert view.scratch == ("/tmp",) and view.masks == ()
    root = view.root
    secret = p["cache"] / "groups" / "k1" / "results.jsonl"
    sibling = p["run"] / "runs" / "reference-base" / "results.jsonl"
    check = (f"test -f {root}/models/tiny-llama/config.json && touch {root}/run/written && test \"$(pwd)\" = {root}/run"
             f" && touch /tmp/scratch && test -z \"$(ls -A /tmp | grep -v scratch)\""
             f" && ! test -e {secret} && ! test -e {sibling} && ! test -e {root}/engine0/overlay.json"
             f" && ! touch {root}/models/tiny-llama/x 2>/dev/null && ! touch {root}/new 2>/dev/null")
    cmd = ["unshare", *user_flag(), "--mount", "--", "sh", "-c", SANDBOX_SCRIPT, "sandbox", *view.sandbox_args(),
           "--", "sh", "-c", check]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert (p["out"] / "written").is_file() and not Path("/tmp/scratch").exists()  # its /tmp is its own
