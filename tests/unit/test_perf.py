"""`infercheck perf` (infercheck/perf.py) without an engine: a stand-in for the validate command writes
run folders whose breakdown depends on what its cache already holds, so the rounds, the fresh caches,
the medians and the JSON can be checked."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from infercheck.errors import InfercheckError
from infercheck.paths import PATCHES_DIR
from infercheck.perf import (Completed, PerfPlan, Sample, Scenario, perf_plan, perf_text, run_perf, summarise,
                             write_perf)
from infercheck.records import ValidationRun
from infercheck.report.files import write_report
from infercheck.timing import GroupTime, Seconds, TimeBreakdown, WorkerRole, WorkerTime

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "report" / "symptom_only.json"
CASE = PATCHES_DIR / "rotary-half-precision-cache"


def breakdown(wall: float, generation: float, reused: bool) -> TimeBreakdown:
    seconds = Seconds(wall_s=wall, import_s=0.0 if reused else 15.0, generation_s=generation,
                      other_s=wall - generation - (0.0 if reused else 15.0), reused_s=30.0 if reused else 0.0)
    return TimeBreakdown([WorkerTime("base", WorkerRole.ENGINE, seconds, groups=[GroupTime("g0", reused=reused)])])


class StandIn:
    """Runs `validate` as far as the bench can see: a run folder per patch under --out, a
    candidates.json for several, each run's cost by what its cache held before."""

    def __init__(self, returncode: int = 0) -> None:
        self.calls: list[tuple[list[str], Path]] = []
        self.returncode = returncode
        self.run = ValidationRun.from_dict(json.loads(FIXTURE.read_text()))

    def __call__(self, argv: list[str], environ: dict[str, str]) -> Completed:
        cache = Path(environ["INFERCHECK_CACHE"])
        patches = [Path(a) for a in argv[argv.index("validate") + 1:argv.index("--case")]]
        out = Path(argv[argv.index("--out") + 1])
        self.calls.append((argv, cache))
        if self.returncode > 1:
            return Completed(self.returncode, 1.0, "Traceback ...\ninfercheck: error: boom")
        rows = []
        for patch in patches:
            cached = (cache / patch.name).exists()
            base_cached = any(cache.iterdir())
            wall = 5.0 if cached else 60.0 if base_cached else 180.0
            run = dataclasses.replace(self.run, elapsed_s=wall - 1, stages={"build": 1.0, "run": wall - 3},
                                      timing=breakdown(wall - 3, 0.0 if cached else 8.0, cached))
            folder = out / patch.stem if len(patches) > 1 else out
            write_report(run, folder)
            (cache / patch.name).write_text("")
            rows.append({"report": patch.stem, "elapsed_s": wall})
        if len(patches) > 1:
            (out / "candidates.json").write_text(json.dumps({"candidates": rows}))
        return Completed(self.returncode, sum(r["elapsed_s"] for r in rows) + 2.0)


@pytest.fixture
def plan(tmp_path) -> PerfPlan:
    return perf_plan(CASE, 2, 7, tmp_path / "work", tmp_path / "caches")


def test_each_round_is_cold_warm_and_a_further_candidate_in_a_cache_of_its_own(plan):
    stand_in = StandIn()
    result = run_perf(plan, stand_in)
    caches = [cache for _, cache in stand_in.calls]
    assert len(caches) == 2 * 3 + 1
    assert caches[0] == caches[1] == caches[2] != caches[3] == caches[4] == caches[5] != caches[6]
    assert not any(cache.exists() for cache in caches)  # every fresh cache removed after its round
    argv = stand_in.calls[0][0]
    assert argv[argv.index("--seed") + 1] == "7" and "--quiet" in argv
    scenarios = [s.scenario for s in result.samples]
    assert scenarios == [Scenario.COLD, Scenario.WARM, Scenario.CANDIDATE] * 2 + [Scenario.MULTI] * 2
    assert [s.wall_s for s in result.samples[:3]] == [182.0, 7.0, 62.0]  # the command's wall, from outside
    assert result.multi_candidate_wall_s == 242.0


def test_the_medians_and_ratios_per_scenario(plan):
    summaries = {s.scenario: s for s in run_perf(plan, StandIn()).summaries}
    cold, warm, further = summaries[Scenario.COLD], summaries[Scenario.WARM], summaries[Scenario.CANDIDATE]
    assert (cold.runs, cold.wall_s, cold.elapsed_s, cold.engine_work_s) == (2, 182.0, 179.0, 8.0)
    assert cold.workers.import_s == 15.0 and cold.per_worker["base"].wall_s == 177.0
    assert cold.engine_share == pytest.approx(8.0 / 177.0, abs=1e-4)
    assert cold.wall_per_engine_work == pytest.approx(182.0 / 8.0, abs=1e-4)
    assert warm.engine_work_s == 0.0 and warm.wall_per_engine_work is None and warm.workers.reused_s == 30.0
    assert further.wall_s == 62.0 and cold.stages == {"build": 1.0, "run": 177.0}
    assert summaries[Scenario.MULTI].runs == 2


def test_a_median_over_odd_samples_and_a_worker_missing_from_one(plan):
    def sample(wall: float, workers: list[str]) -> Sample:
        return Sample(Scenario.COLD, wall, wall, "RESOLVED", {"run": wall},
                      TimeBreakdown([WorkerTime(w, WorkerRole.ENGINE, Seconds(wall_s=wall, generation_s=1.0))
                                     for w in workers]))

    summary = summarise(Scenario.COLD, [sample(10, ["base"]), sample(30, ["base", "patched"]), sample(20, ["base"])])
    assert summary.wall_s == 20.0 and summary.per_worker["patched"].wall_s == 30.0
    assert summary.workers.wall_s == 20.0 and summary.verdicts == ["RESOLVED"] * 3


def test_the_json_holds_every_sample_and_the_medians(plan, tmp_path):
    result = run_perf(plan, StandIn())
    data = json.loads(write_perf(result, tmp_path / "reports" / "bench-perf.json").read_text())
    assert (data["case"], data["seed"], data["rounds"]) == ("rotary-half-precision-cache", 7, 2)
    assert [s["scenario"] for s in data["summaries"]] == ["cold", "warm", "candidate", "multi-candidate"]
    cold = data["summaries"][0]
    assert set(cold["workers"]) == {f.name for f in dataclasses.fields(Seconds)}
    assert {"engine_share", "wall_per_engine_work", "per_worker", "stages"} <= set(cold)
    assert len(data["samples"]) == 8 and data["samples"][0]["timing"]["workers"][0]["worker"] == "base"
    assert "cold" in perf_text(result) and "wall / engine work" in perf_text(result)


def test_a_failed_validate_stops_the_bench_with_one_line_and_no_cache_left(plan):
    stand_in = StandIn(returncode=2)
    with pytest.raises(InfercheckError, match=r"^perf cold: validate exited with 2 .*: infercheck: error: boom$"):
        run_perf(plan, stand_in)
    assert not stand_in.calls[0][1].exists()


def test_bad_input_is_one_line(tmp_path):
    with pytest.raises(InfercheckError, match="--runs must be at least 1"):
        perf_plan(CASE, 0, 1, tmp_path / "work", tmp_path / "caches")
    (tmp_path / "work").mkdir()
    with pytest.raises(InfercheckError, match="need a fresh folder"):
        perf_plan(CASE, 1, 1, tmp_path / "work", tmp_path / "caches")
    with pytest.raises(InfercheckError, match="not a case folder"):
        perf_plan(tmp_path / "nowhere", 1, 1, tmp_path / "other", tmp_path / "caches")


def test_a_cache_root_that_cannot_be_made_is_one_line(tmp_path):
    (tmp_path / "file").write_text("")
    plan = perf_plan(CASE, 1, 1, tmp_path / "work", tmp_path / "file" / "caches")
    with pytest.raises(InfercheckError, match="cannot make a fresh cache folder under"):
        run_perf(plan, StandIn())
