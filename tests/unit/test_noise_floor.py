"""The noise floor (checks/noise_floor.py): thresholds from a measured A/A run, the floor job's
plan, and grading that reads a floor run's stored rows."""

import math

import pytest

from infercheck.checks.noise_floor import FloorSettings, NoiseFloor, measure, threshold, tolerance
from infercheck.checks.parity_check import parity_check
from infercheck.names import CheckKind
from infercheck.plan import ALONE, SYMPTOM, engine_job, floor_job, make_plan, parity_workloads
from infercheck.run.job import RequestResult
from infercheck.suites import load_symptom, select_suites
from tests.recorded import graded, recorded_plan, unpack

LN = math.log
TABLE = {"max_kl": 1e-4, "mean_kl": 1e-5, "max_abs_dlogprob": 1e-3, "min_top1": 1.0, "near_tie": 1e-3}
SETTINGS = FloorSettings(10.0, {"max_kl": 1e-8, "mean_kl": 1e-9, "max_abs_dlogprob": 5e-5})


def result(rid, out, logprobs, group="g0"):
    return RequestResult(rid, group, [1, 5], out, "", "length", logprobs, [p[0][1] for p in logprobs])


def position(best: float, other: float = None) -> list[list[float]]:
    """A top-2 position: token 3 chosen with probability `best`, token 4 the rest."""
    return [[3, LN(best)], [4, LN(1 - best if other is None else other)]]


def test_threshold_is_the_floor_times_the_multiple_within_minimum_and_table():
    assert threshold(1e-3, 2e-5, 5e-5, 10) == pytest.approx(2e-4)
    assert threshold(1e-3, 0.0, 5e-5, 10) == 5e-5  # bit-identical runs still allow the minimum
    assert threshold(1e-3, 5e-4, 5e-5, 10) == 1e-3  # a floor never loosens the table
    assert threshold(1e-3, math.inf, 5e-5, 10) == 1e-3 and threshold(1e-3, math.nan, 5e-5, 10) == 1e-3


def test_measure_takes_the_worse_of_reference_and_batch_composition():
    batched = [result("parity/x#a", [3, 3], [position(0.9), position(0.9)])]
    refs = {"parity/x#a": result("r", [3, 3], [position(0.9), position(0.9 + 1e-6)])}
    same = measure("parity/x", batched, batched, refs, 1e-3)
    assert same.vs_itself == {"max_kl": 0.0, "mean_kl": 0.0, "max_abs_dlogprob": 0.0}
    assert same.value("max_abs_dlogprob") == pytest.approx(abs(LN(0.9) - LN(0.900001)), rel=1e-6)
    assert (same.positions, same.self_positions) == (2, 2)
    alone = [result("parity/x#a", [3, 3], [position(0.9), position(0.9 + 1e-3)], group="g0" + ALONE)]
    moved = measure("parity/x", batched, alone, refs, 1e-3)
    assert moved.value("max_abs_dlogprob") == pytest.approx(abs(LN(0.9) - LN(0.901)), rel=1e-6)
    assert moved.value("max_abs_dlogprob") > same.value("max_abs_dlogprob")


def test_measure_compares_two_compositions_only_up_to_their_first_differing_token():
    batched = [result("parity/x#a", [3, 3, 3], [position(0.9)] * 3)]
    alone = [result("parity/x#a", [3, 4, 4], [position(0.9), position(0.5, 0.5), position(0.1)], group="g0" + ALONE)]
    refs = {"parity/x#a": batched[0]}
    floor = measure("parity/x", batched, alone, refs, 1e-3)
    assert floor.self_positions == 1 and floor.vs_itself["max_kl"] == 0.0
    assert measure("parity/x", [], alone, refs, 1e-3) is None  # nothing scored: no floor


def test_tolerance_tightens_from_a_floor_and_says_where_each_number_came_from():
    floor = NoiseFloor("parity/x", {"max_kl": 1e-9, "mean_kl": 1e-11, "max_abs_dlogprob": 5e-6},
                       {"max_kl": 0.0, "mean_kl": 0.0, "max_abs_dlogprob": 0.0}, 120, 120)
    tol = tolerance(TABLE, floor, SETTINGS)
    assert tol.profile["max_kl"] == pytest.approx(1e-8) and tol.profile["mean_kl"] == 1e-9
    assert tol.profile["max_abs_dlogprob"] == pytest.approx(5e-5)
    assert (tol.profile["min_top1"], tol.profile["near_tie"]) == (1.0, 1e-3)  # agreement stays the table's
    assert tol.table == TABLE and tol.floor["max_abs_dlogprob"] == 5e-6 and "120 positions" in tol.note
    noisy = NoiseFloor("parity/x", dict.fromkeys(("max_kl", "mean_kl", "max_abs_dlogprob"), 1.0),
                       dict.fromkeys(("max_kl", "mean_kl", "max_abs_dlogprob"), 0.0), 10, 10)
    assert tolerance(TABLE, noisy, SETTINGS).profile == TABLE  # an unmodified engine that carries the bug
    none = tolerance(TABLE, None, SETTINGS, "the floor run failed (timeout)")
    assert none.profile == TABLE and none.floor == {} and none.note.startswith("the floor run failed")
    assert tolerance(TABLE, floor, None).profile == TABLE


def test_the_bundled_settings_floor_max_dlogprob_and_leave_kl_to_the_table():
    """KL on a lumped tail moves by more than one implementation's floor under a rounding of the
    listed probabilities (suites/noise_floor.yaml): only max |Δlogprob| follows the floor."""
    settings = FloorSettings.load("float32")
    assert set(settings.minimum) == {"max_abs_dlogprob"} and settings.multiple == 10
    floor = NoiseFloor("parity/x", {"max_kl": 3e-7, "mean_kl": 2e-8, "max_abs_dlogprob": 1e-5},
                       {"max_kl": 0.0, "mean_kl": 0.0, "max_abs_dlogprob": 0.0}, 100, 100)
    tol = tolerance(TABLE, floor, settings)
    assert tol.profile == {**TABLE, "max_abs_dlogprob": pytest.approx(1e-4)}
    assert set(tol.floor) == {"max_kl", "mean_kl", "max_abs_dlogprob"}  # every floor shown
    assert "max_kl, mean_kl: the table's" in tol.note
    assert FloorSettings.load("int4") is None


def test_a_bug_far_under_the_table_fails_against_its_floor():
    """The case the floor exists for: |Δlogprob| of 9e-4 (~180 × a 5e-6 floor) passes the float32
    table's 1e-3 and fails 10 × the floor."""
    engine = {v: [result("parity/x#a", [3], [position(0.9)])] for v in ("base", "patched")}
    ref_ok = result("r", [3], [position(0.9 * math.exp(5e-6))])
    ref_bug = result("r", [3], [position(0.9 * math.exp(9e-4))])
    refs = {"base": {"parity/x#a": ref_bug}, "patched": {"parity/x#a": ref_ok}}
    floor = measure("parity/x", engine["patched"], engine["patched"], refs["patched"], 1e-3)
    table_only = parity_check("parity/x", CheckKind.PARITY, engine, refs, tolerance(TABLE, None, SETTINGS), True, {})
    floored = parity_check("parity/x", CheckKind.PARITY, engine, refs, tolerance(TABLE, floor, SETTINGS), True, {})
    assert table_only.base.passed and table_only.patched.passed
    assert not floored.base.passed and floored.patched.passed and floored.flags == []
    assert floored.payload.floor["max_abs_dlogprob"] == pytest.approx(5e-6, rel=1e-3)
    assert "noise floor" in floored.criterion


def test_floor_job_runs_the_parity_workloads_batched_and_alone(tmp_path):
    spec_path = tmp_path / "s.yaml"
    spec_path.write_text("description: d\ncriterion: {type: parity}\nprompts: {set: literal, prompts: ['1+1=']}\n")
    suites = select_suites("tiny-llama-add", ["parity", "addition-zero-shot"])
    plan = make_plan("/m", "tiny-llama-add", "float32", suites, load_symptom(spec_path), tmp_path / "inputs")
    assert parity_workloads(plan) == [*(s.name for s in suites if s.kind == "parity"), SYMPTOM]
    job = floor_job(plan)
    engine = {r.id for g in engine_job(plan).groups for r in g.requests}
    batched = [g for g in job.groups if not g.name.endswith(ALONE)]
    alone = {g.name: g for g in job.groups if g.name.endswith(ALONE)}
    assert {r.id for g in batched for r in g.requests} == engine  # every parity request, as sent
    assert not any(g.lm_eval for g in job.groups) and not job.trace
    for group in batched:
        twin = alone[group.name + ALONE]
        assert twin.engine_args == {**group.engine_args, "max_num_seqs": 1}
        assert [r.id for r in twin.requests] == [r.id + ALONE for r in group.requests][::-1]
    assert floor_job(plan, batched=False).groups == list(alone.values())  # base is unmodified: its run is the batched
    accuracy_only = make_plan("/m", "tiny-llama-add", "float32", select_suites("x", ["addition-zero-shot"]), None,
                              tmp_path / "other")
    assert floor_job(accuracy_only) is None


def with_floor_rows(folder, ok: bool = True, alone_only: bool = False):
    """The recorded run with a floor worker whose rows are base's (batched, and again as the alone
    composition) and whose reference scoring is base's: a floor equal to base's own parity.
    `alone_only`: the floor ran the alone groups only, as where base is the unmodified engine."""
    import json
    import shutil

    runs = folder / "runs"
    shutil.copytree(runs / "base", runs / "floor")
    rows = [json.loads(line) for line in (runs / "base" / "results.jsonl").read_text().splitlines()]
    wanted = [r for r in rows if r["id"].split("#", 1)[0].startswith("parity/")]
    alone = [{**r, "id": r["id"] + ALONE, "group": r["group"] + ALONE} for r in wanted]
    (runs / "floor" / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [*([] if alone_only else wanted),
                                                                                           *alone]))
    outcome = json.loads((runs / "outcome.json").read_text())
    outcome["workers"]["floor"] = {**outcome["workers"]["base"], "ok": ok, "error": None if ok else "timeout"}
    if alone_only:
        (runs / "floor" / "job.json").write_text(floor_job(recorded_plan(folder), batched=False).to_json())
    else:
        shutil.copytree(runs / "reference-base", runs / "reference-floor")
        outcome["workers"]["reference-floor"] = outcome["workers"]["reference-base"]
    (runs / "outcome.json").write_text(json.dumps(outcome))


def test_grading_judges_parity_against_the_stored_floor(tmp_path):
    folder = unpack("root-fix-with-finite-logprobs", tmp_path)
    before = {c.name: c for c in graded(folder).checks if c.kind == CheckKind.PARITY}
    assert before and all(c.payload.floor == {} and c.payload.profile == c.payload.table
                          and c.payload.floor_note.startswith("no floor run recorded") for c in before.values())
    with_floor_rows(folder)
    after = {c.name: c for c in graded(folder).checks if c.kind == CheckKind.PARITY}
    for name, check in after.items():
        floor, profile, table = check.payload.floor, check.payload.profile, check.payload.table
        assert set(floor) == {"max_kl", "mean_kl", "max_abs_dlogprob"}, name
        assert all(profile[m] <= table[m] for m in floor) and profile["min_top1"] == table["min_top1"]
        assert floor["max_kl"] == pytest.approx(before[name].base.value)  # base is its own floor here
        assert check.base.passed  # a run judged against a floor of itself passes


def test_where_the_floor_ran_alone_only_base_is_its_batched_side(tmp_path):
    """No base patches: base is the unmodified engine, so its own rows and reference scoring are the
    floor's batched composition (execute.run_floor) and no reference-floor worker runs."""
    folder = unpack("root-fix-with-finite-logprobs", tmp_path / "a")
    with_floor_rows(folder, alone_only=True)
    assert not (folder / "runs" / "reference-floor").exists()
    twin = unpack("root-fix-with-finite-logprobs", tmp_path / "b")
    with_floor_rows(twin)
    alone_only = {c.name: c.payload for c in graded(folder).checks if c.kind == CheckKind.PARITY}
    full = {c.name: c.payload for c in graded(twin).checks if c.kind == CheckKind.PARITY}
    assert alone_only and all(p.floor for p in alone_only.values())
    assert alone_only == full  # the same floor, read from base instead of a batched re-run


def test_a_failed_floor_run_leaves_the_table_and_says_why(tmp_path):
    folder = unpack("root-fix-with-finite-logprobs", tmp_path)
    with_floor_rows(folder, ok=False)
    checks = [c for c in graded(folder).checks if c.kind == CheckKind.PARITY]
    assert checks and all(c.payload.profile == c.payload.table and c.payload.floor == {} for c in checks)
    assert all(c.payload.floor_note == "the floor run failed (timeout): the table's values" for c in checks)



def test_no_floor_is_a_validate_option():
    from infercheck.cli import build_parser
    from infercheck.commands import validate_options

    parse = lambda *extra: validate_options(build_parser().parse_args(["validate", "x.patch", *extra]))  # noqa: E731
    assert parse().floor and not parse("--no-floor").floor
