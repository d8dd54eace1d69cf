"""Where a run's time went (infercheck/timing.py, infercheck/breakdown.py): the per-worker breakdown
built from stored rows, its place in results.json and the report, and the worker's own clock."""

from __future__ import annotations

import dataclasses
import json
import tarfile
from pathlib import Path

import pytest

from infercheck.breakdown import time_breakdown
from infercheck.records import ValidationRun
from infercheck.report.files import load_run, write_report
from infercheck.run import worker
from infercheck.run.job import TIMING, GroupResult, Job, WorkerTiming
from infercheck.run.store import (PytestOutcome, RunOutcome, StoredRun, WorkerOutcome, WorkerRows, load_stored,
                                  read_rows)
from infercheck.timing import GroupTime, Seconds, TimeBreakdown, WorkerRole

DATA = Path(__file__).resolve().parents[1] / "data"
FIXTURE = DATA / "report" / "symptom_only.json"


def group(name: str, work: float, start: float, imports: float = 0.0, lm_eval: float = 0.0,
          reused: bool = False) -> GroupResult:
    return GroupResult(name, {}, 1, 1, 1, work, start, import_s=imports, lm_eval_s=lm_eval, reused=reused)


def stored_run() -> StoredRun:
    """base: two groups run now (the first pays the engine's import), one reused; the reference of
    base: everything reused; the pytest symptom: run now."""
    outcome = RunOutcome({"base": WorkerOutcome(True, elapsed_s=40.0, reused_groups=1, wall_s=42.0),
                          "reference-base": WorkerOutcome(True, reused_groups=1, wall_s=0.5)},
                         pytest={"base": PytestOutcome(True, 0, wall_s=7.0)})
    rows = {"base": WorkerRows(groups=[group("g0", 2.0, 15.0, imports=12.0, lm_eval=3.0), group("g1", 1.0, 0.5),
                                       group("app", 4.0, 16.0, imports=11.0, reused=True)],
                               timing=WorkerTiming(1000.0, 1.5, 39.0)),
            "reference-base": WorkerRows(groups=[group("g0", 6.0, 2.0, imports=5.0, reused=True)])}
    return StoredRun(outcome, rows)


def test_a_worker_s_parts_are_this_run_s_and_reused_groups_count_apart():
    base, reference, pytest_run = time_breakdown(stored_run()).workers
    assert (base.worker, base.role, reference.role, pytest_run.role) == \
        ("base", WorkerRole.ENGINE, WorkerRole.REFERENCE, WorkerRole.PYTEST)
    assert base.seconds == Seconds(wall_s=42.0, import_s=13.5, engine_start_s=15.5, generation_s=3.0, lm_eval_s=3.0,
                                   other_s=7.0, reused_s=31.0)
    assert base.worker_wall_s == 39.0 and base.reused_groups == 1 and not base.all_reused
    assert base.seconds.engine_work_s == 3.0 and base.seconds.engine_share == pytest.approx(3.0 / 42.0)
    assert reference.all_reused and reference.seconds == Seconds(wall_s=0.5, other_s=0.5, reused_s=13.0)
    assert pytest_run.worker == "pytest-base" and pytest_run.seconds == Seconds(wall_s=7.0, other_s=7.0)


def test_the_run_s_total_adds_the_workers_up():
    total = time_breakdown(stored_run()).total()
    assert total == Seconds(wall_s=49.5, import_s=13.5, engine_start_s=15.5, generation_s=3.0, lm_eval_s=3.0,
                            other_s=14.5, reused_s=44.0)
    assert TimeBreakdown().total() == Seconds() and Seconds().engine_share is None


def test_reference_work_is_scoring_and_other_never_goes_below_zero():
    outcome = RunOutcome({"reference-patched": WorkerOutcome(True, elapsed_s=9.0, wall_s=9.0)})
    rows = {"reference-patched": WorkerRows(groups=[group("g0", 6.0, 4.0)])}  # a tick more than the wall
    (worker_time,) = time_breakdown(StoredRun(outcome, rows)).workers
    assert (worker_time.seconds.generation_s, worker_time.seconds.scoring_s, worker_time.seconds.other_s) == \
        (0.0, 6.0, 0.0)


def test_rows_stored_before_the_reused_mark_count_the_last_cached_groups_as_reused():
    outcome = RunOutcome({"patched": WorkerOutcome(True, elapsed_s=20.0, reused_groups=2)})  # before wall_s
    rows = {"patched": WorkerRows(groups=[group("new", 1.0, 15.0), group("a", 1.0, 1.0), group("b", 1.0, 1.0)])}
    (patched,) = time_breakdown(StoredRun(outcome, rows)).workers
    assert [g.reused for g in patched.groups] == [False, True, True]
    assert patched.seconds.wall_s == 20.0 and patched.seconds.engine_start_s == 15.0


def test_a_recorded_run_loads_without_a_breakdown_and_its_rows_say_every_group_was_reused(tmp_path):
    with tarfile.open(DATA / "runs" / "early-path-off.tar.xz") as tar:
        tar.extractall(tmp_path, filter="data")
    folder = tmp_path / "early-path-off"
    assert load_run(folder).timing == TimeBreakdown()
    breakdown = time_breakdown(load_stored(folder / "runs"))
    assert breakdown.workers and all(w.all_reused for w in breakdown.workers)
    assert breakdown.total().engine_work_s == 0.0 and breakdown.total().reused_s > 0


def test_the_breakdown_round_trips_through_results_json_and_shows_in_the_report(tmp_path):
    run = ValidationRun.from_dict(json.loads(FIXTURE.read_text()))
    run = dataclasses.replace(run, timing=time_breakdown(stored_run()))
    paths = write_report(run, tmp_path / "run")
    assert load_run(tmp_path / "run") == run
    stored = json.loads(paths["results"].read_text())["timing"]["workers"][0]
    assert stored["role"] == "engine" and stored["seconds"]["engine_start_s"] == 15.5
    assert stored["groups"][2] == {**dataclasses.asdict(GroupTime("app", 11.0, 16.0, 4.0)), "reused": True}
    html = paths["html"].read_text()
    assert "Where the time went" in html and "reference scoring" in html and "engine work / wall" in html
    assert "costs ~0 now" in html and "pytest-base" in html
    assert "timing" not in json.loads(paths["verdict"].read_text())  # verdict.json stays what regrade reproduces


def test_a_run_without_a_breakdown_says_so_in_the_report(tmp_path):
    run = ValidationRun.from_dict(json.loads(FIXTURE.read_text()))
    html = write_report(run, tmp_path / "run")["html"].read_text()
    assert "No per-worker breakdown" in html


@pytest.mark.parametrize("text, expected", [
    ('{"started": 1.0, "boot_s": 0.5, "wall_s": 3}', WorkerTiming(1.0, 0.5, 3.0)),
    ('{"started": 1.0, "boot_s": "soon", "wall_s": 3}', None),
    ('{"started": 1.0}', None),
    ("not json", None),
])
def test_a_worker_s_clock_is_read_back_or_left_out_never_a_traceback(tmp_path, text, expected):
    (tmp_path / TIMING).write_text(text)
    assert read_rows(tmp_path).timing == expected


def test_the_worker_writes_its_own_clock_as_it_ends(tmp_path):
    job_file = tmp_path / "job.json"
    job_file.write_text(Job("vllm", "/models/none", "float32", []).to_json())
    assert worker.main(["--job", str(job_file), "--out", str(tmp_path / "out")]) == 0
    timing = read_rows(tmp_path / "out").timing
    assert timing is not None and timing.started > 0 and 0 <= timing.boot_s <= timing.wall_s
    (tmp_path / "bad.json").write_text("{")
    assert worker.main(["--job", str(tmp_path / "bad.json"), "--out", str(tmp_path / "bad")]) == worker.EXIT_HANDLED_ERROR
    assert read_rows(tmp_path / "bad").timing is not None  # a job that ends in an error still says how long it took


def test_lm_eval_time_is_its_import_and_its_tasks(monkeypatch):
    from infercheck.run import lm_eval_runner
    from infercheck.run.job import Group, LmEvalTask, Sink

    emitted = []
    sink = Sink(lambda result: None, emitted.extend)
    plain = Group("g", {}, [])
    assert lm_eval_runner.evaluate(lambda: pytest.fail("no tasks: no model"), plain, sink) == lm_eval_runner.EvalTime()
    monkeypatch.setattr(lm_eval_runner, "run_tasks", lambda lm, tasks, name: [{"group": name, "lm": lm}])
    with_task = Group("g", {}, [], lm_eval=[LmEvalTask("t", "accuracy/x", "/tasks")])
    spent = lm_eval_runner.evaluate(lambda: "model", with_task, sink)
    assert emitted == [{"group": "g", "lm": "model"}] and spent.import_s >= 0 and spent.run_s >= 0
