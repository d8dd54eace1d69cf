"""A model that is not bundled (docs/design.md, "Any model"): a random Qwen2 with its own byte-level
BPE tokenizer, built locally, gets the model-agnostic parity suite, apps and an oracle on itself,
and the rotary case's root fix and its unreached fix get their verdicts on it with a parity symptom
(the case's own symptom is accuracy on the bundled models' task)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infercheck.paths import PATCHES_DIR
from tests.conftest import cli_env

pytestmark = pytest.mark.engine

CASE = PATCHES_DIR / "rotary-half-precision-cache"
SYMPTOM = Path(__file__).parents[1] / "data" / "symptoms" / "general-long-parity.yaml"
APPS = ("app/batch-invariance", "app/logprobs", "oracle/prefix-cache")


@pytest.fixture(scope="module")
def foreign_run(session_cache, tmp_path_factory):
    root = tmp_path_factory.mktemp("any-model")
    model = root / "tiny-qwen2"
    built = subprocess.run([sys.executable, "-m", "infercheck.cli", "models", "random", "qwen2", "--out", str(model)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    out = root / "candidates"
    proc = subprocess.run([sys.executable, "-m", "infercheck.cli", "validate", "--case", str(CASE),
                           str(CASE / "fixes" / "root-float32-table.patch"),
                           str(CASE / "fixes" / "native-path-rebuild.patch"),
                           "--model", str(model), "--symptom", str(SYMPTOM),
                           "--apps", ",".join(a.split("/")[1] for a in APPS), "--out", str(out)],
                          capture_output=True, text=True, env=cli_env(session_cache), timeout=2400)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    data = json.loads((out / "candidates.json").read_text())
    results = {Path(c["patch"]).stem: json.loads((out / c["report"] / "results.json").read_text())
               for c in data["candidates"]}
    return model, results


def test_the_root_fix_is_resolved_and_the_unreached_fix_not_fixed_on_a_model_outside_the_zoo(foreign_run):
    _, results = foreign_run
    verdicts = {name: r["verdict"]["headline"] for name, r in results.items()}
    assert verdicts == {"root-float32-table": "RESOLVED", "native-path-rebuild": "NOT_FIXED"}, verdicts
    unreached = {c["name"]: c for c in results["native-path-rebuild"]["checks"]}
    assert not unreached["symptom"]["base"]["passed"] and not unreached["symptom"]["patched"]["passed"]


def test_the_model_gets_general_text_parity_apps_and_an_oracle_on_itself(foreign_run):
    model, results = foreign_run
    run = results["root-float32-table"]
    checks = {c["name"]: c for c in run["checks"]}
    assert "parity/general-text" in checks and not any(n.startswith("accuracy/") for n in checks)
    for name in ("parity/general-text", *APPS):
        assert checks[name]["patched"]["passed"] and not checks[name]["patched"]["error"], (name, checks[name])
    # base is the bug: the general-text suite's long prompts see it, against this model's own noise floor
    parity = checks["parity/general-text"]
    assert not parity["base"]["passed"] and parity["base"]["detail"]["max_abs_dlogprob"] > 100 * \
        parity["patched"]["detail"]["max_abs_dlogprob"]
    assert run["model"] == model.name
