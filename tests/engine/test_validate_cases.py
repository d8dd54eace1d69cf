"""The bundled benchmark's quick subset through the real pipeline (`infercheck bench --quick`):
vLLM-CPU workers for base and patched, the HF reference, checks, verdicts and report files (lm-eval: tests/engine/test_parity.py).
The quick subset covers every verdict class the cases expect (tests/unit/test_bench.py checks that),
plus the bug check of each case it touches (the bug reproduces on the clean engine). The full
benchmark is `make bench`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infercheck.paths import PATCHES_DIR
from tests.conftest import cli_env

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def quick_bench(session_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, subprocess.CompletedProcess]:
    out = tmp_path_factory.mktemp("bench")
    proc = subprocess.run([sys.executable, "-m", "infercheck.cli", "bench", "--quick", "--out", str(out)],
                          capture_output=True, text=True, env=cli_env(session_cache), timeout=3600)
    return out, json.loads((out / "bench.json").read_text()), proc


def test_quick_bench_gets_every_expected_verdict(quick_bench):
    out, bench, proc = quick_bench
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    wrong = [(r["case"], r["candidate"], r["expected"], r["got"]) for r in bench["rows"] if not r["matches"]]
    assert not wrong and proc.returncode == 0, (wrong, proc.stdout, proc.stderr[-3000:])
    assert any(r["candidate"] == "bug" and r["got"] == "REPRODUCED" for r in bench["rows"])
    assert "expected \\ got" in proc.stdout and (out / "index.html").is_file()


def test_every_quick_report_carries_its_evidence(quick_bench):
    out, bench, _ = quick_bench
    for row in bench["rows"]:
        folder = out / row["report"]
        for name in ("index.html", "junit.xml", "summary.md", "results.json", "verdict.json"):
            assert (folder / name).is_file(), (row["candidate"], name)
        html = (folder / "index.html").read_text()
        results = json.loads((folder / "results.json").read_text())
        assert "symptom" in html and all(c["name"] in html for c in results["checks"])
        flags = {f for check in results["checks"] for f in check["flags"]}
        if row["expected"] == "COLLATERAL":  # a neighbouring check that passed on base fails on patched
            assert "regressed" in flags
        if row["expected"] == "WORKAROUND":  # with the runtime evidence, not only a static sign
            assert any("workaround" in c["flags"] for c in results["checks"] if c["kind"] == "app")
        if row["candidate"] != "bug":
            assert json.loads((folder / "verdict.json").read_text())["expected"] == row["expected"]
        for check in results["checks"]:  # parity judged against the unmodified engine's measured floor
            payload = check.get("payload") or {}
            if payload.get("type") == "ParityPayload":
                assert payload["floor"] and "unmodified engine" in payload["floor_note"], (row["candidate"], check)
                assert all(payload["profile"][m] <= payload["table"][m] for m in payload["profile"])


def test_regrade_reproduces_every_verdict_without_engine(quick_bench):
    """grade → verdict → report again from each run folder's stored worker results: the same
    verdict.json, byte for byte (the harness has not changed in between)."""
    out, bench, _ = quick_bench
    for row in bench["rows"]:
        folder = out / row["report"]
        before = (folder / "verdict.json").read_text()
        proc = subprocess.run([sys.executable, "-m", "infercheck.cli", "regrade", str(folder)], capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr[-3000:]
        assert (folder / "verdict.json").read_text() == before, row["candidate"]


def test_report_rerenders_without_engine(quick_bench, tmp_path):
    out, bench, _ = quick_bench
    folder = out / bench["rows"][-1]["report"]
    before = (folder / "verdict.json").read_text()
    (folder / "index.html").unlink()
    proc = subprocess.run([sys.executable, "-m", "infercheck.cli", "report", str(folder)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (folder / "index.html").is_file() and (folder / "verdict.json").read_text() == before


def test_many_candidates_get_the_bench_verdicts_and_a_ranking(quick_bench, session_cache, tmp_path):
    """A case's fixes/ folder validated at once, in the bench's prompt draw: every group comes from
    the cache the bench filled, each candidate gets the verdict the bench gave it, the best first."""
    _, bench, _ = quick_bench
    case = PATCHES_DIR / "batch-condense-token-count"
    out = tmp_path / "candidates"
    proc = subprocess.run([sys.executable, "-m", "infercheck.cli", "validate", str(case / "fixes"), "--case", str(case),
                           "--out", str(out), "--seed", str(bench["seed"])], capture_output=True, text=True,
                          env=cli_env(session_cache), timeout=1800)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    data = json.loads((out / "candidates.json").read_text())
    got = {Path(c["patch"]).stem: c["verdict"] for c in data["candidates"]}
    assert got == {r["candidate"]: r["got"] for r in bench["rows"] if r["case"] == case.name and r["candidate"] != "bug"}
    assert data["candidates"][0]["verdict"] == "RESOLVED" and data["candidates"][0]["rank"] == 1
    assert all((out / c["report"] / "index.html").is_file() for c in data["candidates"])
    assert "1. RESOLVED" in proc.stdout and (out / "index.html").is_file()
