"""`infercheck bench-merge`: bench folders run on parts of the cases at one seed become one bench."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infercheck.bench import BenchResult, BenchRow, write_bench
from infercheck.bench_merge import load_bench, merge_benches
from infercheck.errors import InfercheckError
from infercheck.paths import PATCHES_DIR, REPO_ROOT
from tests.conftest import assert_one_line_error, infercheck

SEED = 1726170616


def part(folder: Path, rows: list[BenchRow], seed: int | None = SEED, quick: bool = False) -> Path:
    write_bench(BenchResult(rows, 100.0 * len(rows), True, quick, list(dict.fromkeys(r.case for r in rows)), seed),
                folder)
    return folder


def row(case: str, cand: str, expected: str, got: str) -> BenchRow:
    return BenchRow(case, cand, expected, got, 10.0, f"{case}/{cand}", "why")


def test_parts_become_one_bench_a_later_row_replacing_an_earlier_one(tmp_path):
    first = part(tmp_path / "part1", [row("a", "bug", "REPRODUCED", "REPRODUCED"), row("a", "root", "RESOLVED", "NOT_FIXED")])
    second = part(tmp_path / "part2", [row("b", "bug", "REPRODUCED", "REPRODUCED"), row("a", "root", "RESOLVED", "RESOLVED")])
    out = tmp_path / "merged"
    merged = merge_benches([(f, load_bench(f)) for f in (first, second)], out)
    assert [(r.case, r.candidate, r.got) for r in merged.rows] == [
        ("a", "bug", "REPRODUCED"), ("a", "root", "RESOLVED"), ("b", "bug", "REPRODUCED")]
    assert not merged.mismatches and merged.seed == SEED and merged.cases == ["a", "b"] and merged.wall_s == 400.0
    by_row = {(r.case, r.candidate): r.report for r in merged.rows}
    assert by_row[("a", "root")] == "../part2/a/root" and by_row[("a", "bug")] == "../part1/a/bug"


def test_the_command_writes_the_merged_page_and_exits_one_on_a_mismatch(tmp_path, session_cache):
    first = part(tmp_path / "p1", [row("a", "root", "RESOLVED", "RESOLVED")])
    second = part(tmp_path / "p2", [row("b", "root", "RESOLVED", "WORKAROUND")])
    out = tmp_path / "merged"
    proc = infercheck(session_cache, "bench-merge", str(first), str(second), "--out", str(out))
    assert proc.returncode == 1, proc.stderr
    data = json.loads((out / "bench.json").read_text())
    assert (data["correct"], data["total"], data["seed"]) == (1, 2, SEED) and (out / "index.html").is_file()
    assert "MISMATCH b/root: expected RESOLVED, got WORKAROUND" in proc.stdout
    assert (first / "bench.json").is_file() and json.loads((first / "bench.json").read_text())["total"] == 1


def test_other_seeds_quick_parts_and_folders_without_a_bench_are_refused(tmp_path, session_cache):
    one = part(tmp_path / "s1", [row("a", "root", "RESOLVED", "RESOLVED")])
    other = part(tmp_path / "s2", [row("b", "root", "RESOLVED", "RESOLVED")], seed=20261206)
    quick = part(tmp_path / "q", [row("c", "root", "RESOLVED", "RESOLVED")], quick=True)
    with pytest.raises(InfercheckError, match="different prompt draws"):
        merge_benches([(f, load_bench(f)) for f in (one, other)], tmp_path / "m")
    with pytest.raises(InfercheckError, match="quick and full"):
        merge_benches([(f, load_bench(f)) for f in (one, quick)], tmp_path / "m")
    (tmp_path / "empty").mkdir()
    proc = infercheck(session_cache, "bench-merge", str(tmp_path / "empty"), "--out", str(tmp_path / "m"))
    assert_one_line_error(proc, 2, "no bench.json")
    assert not (tmp_path / "m").exists()


def test_the_kept_parts_of_a_seed_merge_into_one_bench_of_bundled_cases(tmp_path):
    """docs/bench-records/: each seed's parts merge (one seed, full benches), name bundled cases
    only, and no case is in two parts."""
    records = REPO_ROOT / "docs" / "bench-records"
    bundled = {p.name for p in PATCHES_DIR.iterdir() if p.is_dir()}
    for seed_dir in sorted(p for p in records.iterdir() if p.is_dir()):
        parts = [(p, load_bench(p)) for p in sorted(seed_dir.iterdir()) if p.is_dir()]
        assert parts, seed_dir
        cases = [c for _, r in parts for c in r.cases]
        assert len(cases) == len(set(cases)) and set(cases) <= bundled, seed_dir
        merged = merge_benches(parts, tmp_path / seed_dir.name)
        assert f"seed-{merged.seed}" == seed_dir.name and not merged.quick
        assert {r.case for r in merged.rows} == set(cases)
