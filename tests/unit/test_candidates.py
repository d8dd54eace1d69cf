"""Many candidates against one base: the ranking (verdict, then evidence), the patches a folder
stands for, the loop that records each candidate's outcome, and the page. The validate here is a
stand-in returning recorded-like runs: the loop and the ranking are pure over them."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from infercheck.candidates import (CandidateRow, folder_names, patch_files, ranked, ranking_text,
                                   validate_candidates, write_candidates)
from infercheck.errors import InfercheckError
from tests.conftest import assert_one_line_error, infercheck


def row(patch: str, verdict: str, regressions: int = 0, failing: int = 0, flags: int = 0) -> CandidateRow:
    return CandidateRow(patch, verdict, 0 if verdict == "RESOLVED" else 1, patch, 1.0,
                        [f"r{i}" for i in range(regressions)], [f"f{i}" for i in range(failing)],
                        [f"X: {i}" for i in range(flags)])


def test_candidates_rank_by_verdict_then_by_evidence_and_ties_share_a_rank():
    rows = ranked([row("collateral-big", "COLLATERAL", regressions=3, failing=3),
                   row("error", "ERROR:build"),
                   row("symptom-only", "SYMPTOM_ONLY", failing=1, flags=1),
                   row("collateral-small", "COLLATERAL", regressions=1, failing=1),
                   row("root-b", "RESOLVED"), row("root-a", "RESOLVED"),
                   row("workaround", "WORKAROUND", flags=1)])
    assert [r.patch for r in rows] == ["root-a", "root-b", "workaround", "symptom-only", "collateral-small",
                                       "collateral-big", "error"]
    assert [r.rank for r in rows] == [1, 1, 3, 4, 5, 6, 7]
    assert "1. RESOLVED" in ranking_text(SimpleNamespace(rows=rows, base="case x"))


def test_a_folder_stands_for_its_patches_each_once(tmp_path):
    (tmp_path / "fixes").mkdir()
    for name in ("b.patch", "a.diff", "notes.txt"):
        (tmp_path / "fixes" / name).write_text("x")
    a = tmp_path / "fixes" / "a.diff"
    assert patch_files([tmp_path / "fixes", a]) == [a, tmp_path / "fixes" / "b.patch"]
    with pytest.raises(InfercheckError, match="patch not found"):
        patch_files([tmp_path / "missing.patch"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InfercheckError, match="no \\*.patch"):
        patch_files([tmp_path / "empty"])


def test_report_folders_are_unique_where_stems_repeat():
    assert folder_names([Path("a/root.patch"), Path("b/root.patch"), Path("b/other.patch")]) == \
        ["a-root", "b-root", "other"]


def fake_run(headline: str, checks: list[tuple[str, bool | None, bool | None]]) -> SimpleNamespace:
    return SimpleNamespace(
        verdict=SimpleNamespace(headline=headline, exit_code=0 if headline == "RESOLVED" else 1,
                                flags=[SimpleNamespace(code=headline, message="why")] if headline != "RESOLVED" else []),
        checks=[SimpleNamespace(name=n, base=SimpleNamespace(passed=b), patched=SimpleNamespace(passed=p))
                for n, b, p in checks])


def test_every_candidate_is_validated_with_one_seed_and_failures_are_recorded(tmp_path):
    patches = [Path(f"{n}.patch") for n in ("collateral", "root", "broken", "crashes")]
    seeds = []

    def options(patch: Path, folder: Path) -> SimpleNamespace:
        return SimpleNamespace(patch=patch, out=folder, seed=42)

    def validate(opts):
        seeds.append(opts.seed)
        if opts.patch.stem == "broken":
            raise InfercheckError("patch does not apply")
        if opts.patch.stem == "crashes":
            raise RuntimeError("harness bug")
        opts.out.mkdir(parents=True)
        if opts.patch.stem == "root":
            return fake_run("RESOLVED", [("symptom", False, True), ("app/a", True, True)]), opts.out
        return fake_run("COLLATERAL", [("symptom", False, True), ("app/a", True, False)]), opts.out

    result = validate_candidates(patches, tmp_path, options, validate, lambda m: None, "case x")
    assert seeds == [42] * 4 and result.seed == 42
    assert [(r.patch, r.verdict, r.rank) for r in result.rows] == [
        ("root.patch", "RESOLVED", 1), ("collateral.patch", "COLLATERAL", 2),
        ("broken.patch", "ERROR:input", 3), ("crashes.patch", "ERROR:harness", 3)]
    collateral = result.rows[1]
    assert collateral.regressions == ["app/a"] and collateral.failing == ["app/a"]
    assert result.exit_code == 0  # the best candidate passes
    assert "RuntimeError: harness bug" in (tmp_path / "crashes" / "harness-error.txt").read_text()

    paths = write_candidates(result, tmp_path)
    data = json.loads(paths["json"].read_text())
    assert [c["patch"] for c in data["candidates"]] == [r.patch for r in result.rows]
    page = paths["html"].read_text()
    assert 'href="root/index.html"' in page and 'href="crashes/harness-error.txt"' in page
    assert 'href="broken/' not in page  # bad input: no run folder to link


def test_bad_candidate_lists_are_one_line_errors(isolated_cache, tmp_path):
    (tmp_path / "a.patch").write_text("x")
    proc = infercheck(isolated_cache, "validate", str(tmp_path / "a.patch"), str(tmp_path / "missing.patch"))
    assert_one_line_error(proc, 2, "patch not found")
    (tmp_path / "b.patch").write_text("x")
    proc = infercheck(isolated_cache, "validate", str(tmp_path / "a.patch"), str(tmp_path / "b.patch"), "--github")
    assert_one_line_error(proc, 2, "--github takes one candidate")
