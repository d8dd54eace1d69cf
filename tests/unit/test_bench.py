"""The bench's bookkeeping: which candidates run, the confusion matrix, mismatches, the bench page.
The validator here is a stand-in returning given headlines; verdicts themselves are engine-tier tests."""

import json
from types import SimpleNamespace

import pytest

from infercheck.bench import BenchRow, bug_outcome, confusion, load_cases, matrix_text, run_bench
from infercheck.errors import InfercheckError
from infercheck.paths import PATCHES_DIR
from infercheck.report.html import render_bench
from infercheck.bench import write_bench


def test_bundled_cases_load_and_the_quick_subset_covers_every_expected_verdict():
    cases = load_cases(PATCHES_DIR, None)
    assert len(cases) >= 2
    quick = {c.expected for case in cases for c in case.candidates if c.quick}
    every = {c.expected for case in cases for c in case.candidates}
    assert quick == every, f"the quick subset misses {every - quick}"


def test_every_bundled_case_has_the_three_fix_kinds_in_distinct_areas():
    """The benchmark's contract: per case a root fix, a symptom-only fix or a workaround, and a fix
    with collateral breakage; the cases cover distinct code areas."""
    cases = load_cases(PATCHES_DIR, None)
    assert len(cases) >= 8 and len({case.area for case in cases}) == len(cases)
    for case in cases:
        kinds = {c.expected for c in case.candidates}
        assert "RESOLVED" in kinds and "COLLATERAL" in kinds and kinds & {"SYMPTOM_ONLY", "WORKAROUND"}, case.id


def test_unknown_case_and_empty_root_are_refused(tmp_path):
    with pytest.raises(InfercheckError, match="unknown case"):
        load_cases(PATCHES_DIR, ["no-such-case"])
    with pytest.raises(InfercheckError, match="no cases"):
        load_cases(tmp_path, None)


def fake_run(headline, base_passed=None, patched_passed=None):
    checks = [] if base_passed is None else [
        SimpleNamespace(kind="symptom", base=SimpleNamespace(passed=base_passed), patched=SimpleNamespace(passed=patched_passed))]
    return SimpleNamespace(verdict=SimpleNamespace(headline=headline), checks=checks)


def test_run_bench_collects_verdicts_and_mismatches(tmp_path):
    cases = load_cases(PATCHES_DIR, None)
    expected = {(case.id, c.name): c.expected for case in cases for c in case.candidates}
    wrong = ("rotary-half-precision-cache", "positions-float32")  # the stand-in gets this one wrong

    def validate(folder):  # folder: <bench>/<case>/<candidate>
        folder.mkdir(parents=True)
        if folder.name == "bug":
            return fake_run("NOT_FIXED", True, False), folder
        key = (folder.parent.name, folder.name)
        return fake_run("RESOLVED" if key == wrong else expected[key]), folder

    result = run_bench(cases, tmp_path, lambda case, cand, folder: folder, validate, lambda m: None)
    assert len(result.rows) == len(expected) + len(cases)
    bugs = [r for r in result.rows if r.candidate == "bug"]
    assert len(bugs) == len(cases) and all(r.got == "REPRODUCED" and r.matches for r in bugs)
    assert [(r.case, r.candidate) for r in result.mismatches] == [wrong]
    assert result.matrix()["SYMPTOM_ONLY"]["RESOLVED"] == 1
    assert sum(sum(v.values()) for v in result.matrix().values()) == len(result.rows)
    paths = write_bench(result, tmp_path)
    data = json.loads(paths["bench.json"].read_text())
    assert data["total"] == len(result.rows) and data["correct"] == len(result.rows) - 1
    html = paths["index.html"].read_text()
    assert f'href="{result.rows[1].report}/index.html"' in html and "Confusion matrix" in html
    quick = run_bench(cases, tmp_path / "q", lambda case, cand, folder: folder, validate, lambda m: None,
                      quick=True, bug_checks=False)
    assert {r.candidate for r in quick.rows} == {c.name for case in cases for c in case.candidates if c.quick}


def test_bug_outcomes():
    assert bug_outcome(fake_run("NOT_FIXED", True, False)) == "REPRODUCED"
    assert bug_outcome(fake_run("RESOLVED", True, True)) == "NO_EFFECT"
    assert bug_outcome(fake_run("NOT_FIXED", False, False)) == "FAILS_ON_CLEAN_ENGINE"
    assert bug_outcome(fake_run("ERROR:build")) == "ERROR:build"


def test_confusion_matrix_text():
    rows = [BenchRow("c", "a", "RESOLVED", "RESOLVED", 1.0, "c/a"), BenchRow("c", "b", "COLLATERAL", "RESOLVED", 1.0, "c/b"),
            BenchRow("c", "d", "COLLATERAL", "COLLATERAL", 1.0, "c/d")]
    assert confusion(rows) == {"RESOLVED": {"RESOLVED": 1}, "COLLATERAL": {"RESOLVED": 1, "COLLATERAL": 1}}
    text = matrix_text(rows).splitlines()
    assert text[0].split()[-2:] == ["COLLATERAL", "RESOLVED"] and text[1].split() == ["COLLATERAL", "1", "1"]


def test_a_harness_failure_on_one_candidate_does_not_end_the_bench(tmp_path):
    cases = load_cases(PATCHES_DIR, None)[:1]

    def validate(folder):
        if folder.name == "bug":
            raise RuntimeError("harness bug")
        folder.mkdir(parents=True)
        return fake_run(next(c.expected for c in cases[0].candidates if c.name == folder.name)), folder

    result = run_bench(cases, tmp_path, lambda case, cand, folder: folder, validate, lambda m: None)
    assert result.rows[0].got == "ERROR:harness" and not result.rows[0].matches
    assert "RuntimeError: harness bug" in (tmp_path / result.rows[0].report / "harness-error.txt").read_text()
    assert all(r.matches for r in result.rows[1:]) and len(result.rows) == len(cases[0].candidates) + 1
    page = render_bench(result)  # the failed row links its traceback, not a report that was never written
    assert f'href="{result.rows[0].report}/harness-error.txt"' in page
    assert f'href="{result.rows[0].report}/index.html"' not in page


def test_a_rerun_says_how_much_finished_work_it_reused(tmp_path):
    from infercheck.bench import reused_note
    from infercheck.run.store import RunOutcome, WorkerOutcome

    assert reused_note(tmp_path) == ""  # no run stage recorded
    (tmp_path / "runs").mkdir()
    RunOutcome({"base": WorkerOutcome(True, None, None, 1.0, 7), "patched": WorkerOutcome(True, None, None, 1.0, 2)}
               ).save(tmp_path / "runs")
    assert reused_note(tmp_path) == ", 9 group(s) reused from cache"


def test_a_cases_first_candidate_runs_before_its_others_which_then_run_side_by_side(tmp_path):
    import threading
    import time

    cases = load_cases(PATCHES_DIR, ["batch-condense-token-count", "yarn-ramp-inverted"])
    spans: dict[tuple[str, str], tuple[float, float]] = {}
    lock = threading.Lock()

    def validate(folder):
        began = time.monotonic()
        time.sleep(0.3)
        folder.mkdir(parents=True)
        with lock:
            spans[(folder.parent.name, folder.name)] = (began, time.monotonic())
        return fake_run("NOT_FIXED", True, False) if folder.name == "bug" else fake_run("RESOLVED"), folder

    result = run_bench(cases, tmp_path, lambda case, cand, folder: folder, validate, lambda m: None, streams=2)
    assert sorted((r.case, r.candidate) for r in result.rows) == sorted(spans)  # every row once
    for case in cases:
        first_end = spans[(case.id, "bug")][1]
        later = [span for (c, name), span in spans.items() if c == case.id and name != "bug"]
        assert later and all(start >= first_end for start, _ in later), case.id  # after the base was computed
    both = [span for (c, name), span in spans.items() if name != "bug"]
    assert any(a[0] < b[1] and b[0] < a[1] for a in both for b in both if a is not b)  # candidates overlapped
    assert [(r.case, r.candidate) for r in result.rows][0] == (cases[0].id, "bug")  # rows in the bench's order
