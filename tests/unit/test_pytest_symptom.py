"""A pytest-node symptom runs in the variant's env (here the installed one, with an env var standing
in for a patched module) and reports pass/fail."""

import json
from dataclasses import replace

import pytest

from infercheck.build.engine_env import installed_env
from infercheck.run.pytest_runner import run_pytest
from infercheck.specs import SymptomSpec


def test_pytest_node_outcome_follows_the_env(tmp_path):
    (tmp_path / "test_repro.py").write_text("import os\n\ndef test_fixed():\n    assert os.environ.get('FIXED') == '1'\n")
    spec = SymptomSpec("repro", "pytest", pytest="test_repro.py::test_fixed", path=str(tmp_path / "symptom.yaml"))
    env = installed_env("cpu")
    failing = run_pytest(spec, env, tmp_path / "base", timeout_s=120)
    passing = run_pytest(spec, replace(env, env={**env.env, "FIXED": "1"}), tmp_path / "patched", timeout_s=120)
    assert failing.passed is False and "assert" in (tmp_path / "base" / "pytest.log").read_text()
    assert passing.passed is True and passing.returncode == 0


def test_a_decided_pytest_run_is_reused_and_keyed_by_its_folder_and_env(tmp_path):
    from infercheck.run.cache import run_pytest_cached

    case = tmp_path / "case"
    (case / "tests").mkdir(parents=True)
    test = case / "tests" / "test_repro.py"
    test.write_text("import os\n\ndef test_fixed():\n    assert os.environ.get('FIXED') == '1'\n")
    spec = SymptomSpec("repro", "pytest", pytest="tests/test_repro.py::test_fixed", path=str(case / "symptom.yaml"))
    env = installed_env("cpu")
    first, reused = run_pytest_cached(spec, env, tmp_path / "run1", 120, [])
    assert (first.passed, reused) == (False, False)
    again, reused = run_pytest_cached(spec, env, tmp_path / "run2", 120, [])
    assert (again, reused) == (first, True)  # a failing test is the test's answer: stored too
    assert (tmp_path / "run2" / "pytest.log").read_text() == (tmp_path / "run1" / "pytest.log").read_text()
    assert run_pytest_cached(spec, env, tmp_path / "run3", 120, [], reuse=False)[1] is False
    fixed = replace(env, env={**env.env, "FIXED": "1"})  # another engine env: its own entry
    passed, reused = run_pytest_cached(spec, fixed, tmp_path / "run4", 120, [])
    assert (passed.passed, reused) == (True, False)
    assert run_pytest_cached(spec, fixed, tmp_path / "run5", 120, []) == (passed, True)
    test.write_text(test.read_text() + "\n\ndef test_other():\n    pass\n")  # the test changed: run again
    assert run_pytest_cached(spec, env, tmp_path / "run6", 120, [])[1] is False


def test_a_pytest_run_that_did_not_decide_is_never_stored(tmp_path):
    from infercheck.run.cache import run_pytest_cached

    (tmp_path / "case").mkdir()
    (tmp_path / "case" / "test_broken.py").write_text("import no_such_module_here\n\ndef test_x():\n    pass\n")
    spec = SymptomSpec("repro", "pytest", pytest="test_broken.py::test_x", path=str(tmp_path / "case" / "symptom.yaml"))
    env = installed_env("cpu")
    outcome, reused = run_pytest_cached(spec, env, tmp_path / "run1", 120, [])
    assert outcome.returncode not in (0, 1) and not reused  # a collection error: the machine's or the test's setup
    assert run_pytest_cached(spec, env, tmp_path / "run2", 120, [])[1] is False


def test_a_pytest_symptom_runs_in_a_view_with_its_folder_and_nothing_of_the_judges(tmp_path):
    from infercheck.paths import REPO_ROOT
    from infercheck.run.sandbox import namespaces_refused

    if namespaces_refused() is not None:
        pytest.skip(f"no mount namespace here: {namespaces_refused()}")
    case = tmp_path / "case"
    (case / "tests").mkdir(parents=True)
    (case / "tests" / "data.txt").write_text("next to the test")
    (case / "tests" / "test_view.py").write_text(f"""import os, sys
from pathlib import Path

def test_view():
    assert (Path(__file__).parent / "data.txt").read_text() == "next to the test"
    assert Path.cwd().name == "symptom"
    assert not os.path.isdir({str(REPO_ROOT)!r}) or not os.listdir({str(REPO_ROOT)!r})
    assert "infercheck" not in " ".join(sys.argv).lower() and "infercheck" not in os.getcwd().lower()
    assert not any("infercheck" in v.lower() for v in os.environ.values())
""")
    spec = SymptomSpec("repro", "pytest", pytest="tests/test_view.py::test_view", path=str(case / "symptom.yaml"))
    outcome = run_pytest(spec, installed_env("cpu"), tmp_path / "run", timeout_s=120)
    assert outcome.passed, (tmp_path / "run" / "pytest.log").read_text()
    assert json.loads((tmp_path / "run" / "containment.json").read_text())["view"] is not None


def test_a_bundled_symptom_keeps_its_place_in_the_repository_beside_the_models():
    from infercheck.paths import MODELS_DIR, PATCHES_DIR
    from infercheck.run.pytest_runner import symptom_binds

    case = PATCHES_DIR / "stop-string-include-split"
    spec = SymptomSpec("repro", "pytest", pytest="tests/test_include_stop.py::x", path=str(case / "symptom.yaml"))
    binds, cwd = symptom_binds(spec)
    assert cwd == "repo/patches/stop-string-include-split"
    assert dict(binds) == {str(case / "tests"): "repo/patches/stop-string-include-split/tests",
                           str(MODELS_DIR): "repo/suites/models"}
    outside = SymptomSpec("repro", "pytest", pytest="../../../elsewhere/test_x.py::x", path=str(case / "symptom.yaml"))
    assert "outside" in symptom_binds(outside)
