"""A pytest-node symptom runs in the variant's env (here the installed one, with an env var standing
in for a patched module) and reports pass/fail."""

from dataclasses import replace

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
