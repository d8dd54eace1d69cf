"""Workers side by side (run/slots.py, execute.py): the CPU slots, their machine-wide locks, the
thread count in a worker's identity, and the runner's order and stop rule, with stand-in worker
scripts (no engine: these claim no verdict)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from infercheck.build.engine_env import EngineEnv
from infercheck.errors import InfercheckError
from infercheck.execute import Runner, side_by_side
from infercheck.options import ValidateOptions
from infercheck.run.cache import engine_identity
from infercheck.run.slots import THREADS_VAR, SlotPool, default_jobs, usable_cpus
from infercheck.run.store import RunOutcome
from tests.unit.test_launcher import fake_python, job

# A stand-in worker: records when it ran, its thread count and the CPUs it may use, then says it is done.
RECORDING_WORKER = ("date +%s.%N > began; echo \"$OMP_NUM_THREADS\" > threads; "
                    "grep Cpus_allowed_list /proc/self/status | cut -f2 > cpus; sleep 1.5; "
                    "date +%s.%N > ended; echo '{\"state\": \"done\"}' > status.json")
FAILING_WORKER = "exit 3"


def two_cpus() -> None:
    if len(usable_cpus()) < 2:
        pytest.skip("needs two CPUs")


def test_slots_split_the_cpus_evenly_and_name_their_threads(tmp_path):
    cpus = usable_cpus()
    pool = SlotPool(len(cpus), "cpu", tmp_path)
    assert [s.cpus for s in pool.slots] == [(c,) for c in cpus] and pool.threads == 1
    whole = SlotPool(1, "cpu", tmp_path)
    assert whole.slots[0].cpus == tuple(cpus) and whole.threads == len(cpus)
    assert len(SlotPool(len(cpus) + 5, "cpu", tmp_path).slots) == len(cpus)  # never more slots than CPUs
    cuda = SlotPool(2, "cuda", tmp_path)
    assert [s.cpus for s in cuda.slots] == [(), ()] and cuda.threads == 0
    with pytest.raises(InfercheckError, match="--jobs 0"):
        SlotPool(0, "cpu", tmp_path)
    assert default_jobs("cuda") == 1 and 1 <= default_jobs("cpu") <= len(cpus)


def test_the_thread_count_is_part_of_an_env_identity_its_cpus_are_not(tmp_path):
    env = EngineEnv("base", "overlay", "/bin/python", "t" * 40)
    pool = SlotPool(1, "cpu", tmp_path)
    with pool.slot() as slot:
        placed = slot.place(env)
    assert placed.env[THREADS_VAR] == str(pool.threads) and placed.cpus == slot.cpus
    assert engine_identity(placed) == engine_identity(pool.identity(env)) != engine_identity(env)


def test_a_slot_is_held_machine_wide(tmp_path):
    """Two pools (two runs on one machine) share the CPUs' lock files: a slot one holds, the other
    cannot take until it is released."""
    two_cpus()
    first, second = SlotPool(1, "cpu", tmp_path), SlotPool(2, "cpu", tmp_path)
    with first.slot():
        assert all(second.try_take(s) is None for s in second.slots)
    held = second.try_take(second.slots[0])
    assert held is not None
    for handle in held:
        handle.close()


def test_slots_are_served_in_the_order_asked(tmp_path):
    pool = SlotPool(1, "cpu", tmp_path)
    order: list[int] = []

    def take(i: int) -> None:
        with pool.slot():
            order.append(i)

    threads = [threading.Thread(target=take, args=(i,)) for i in range(3)]
    with pool.slot():
        for t in threads:  # each asks while the slot is held, one after another
            t.start()
            time.sleep(0.3)
    for t in threads:
        t.join(timeout=10)
    assert order == [0, 1, 2]


def runner(tmp_path: Path, jobs: int) -> Runner:
    opts = ValidateOptions(patch=tmp_path / "p.patch")
    return Runner(opts, tmp_path / "runs", lambda m: None, slots=SlotPool(jobs, "cpu", tmp_path / "locks"))


def span(folder: Path) -> tuple[float, float]:
    return float((folder / "began").read_text()), float((folder / "ended").read_text())


def test_two_slots_run_two_workers_at_once_each_on_its_own_cpu(tmp_path):
    two_cpus()
    env = fake_python(tmp_path, RECORDING_WORKER)
    run = runner(tmp_path, 2)
    outcome = RunOutcome()
    side_by_side([lambda n=n: run.run(job(), env, n, outcome) for n in ("one", "two")])
    a, b = span(tmp_path / "runs" / "one"), span(tmp_path / "runs" / "two")
    assert a[0] < b[1] and b[0] < a[1]  # overlapped
    cpus = {(tmp_path / "runs" / n / "cpus").read_text().strip() for n in ("one", "two")}
    assert len(cpus) == 2 and all("," not in c and "-" not in c for c in cpus)
    assert {(tmp_path / "runs" / n / "threads").read_text().strip() for n in ("one", "two")} == {"1"}
    assert all(outcome.workers[n].ok and outcome.workers[n].wall_s < 3.0 for n in ("one", "two"))


def test_one_slot_runs_them_one_after_another_and_counts_no_wait_as_work(tmp_path):
    env = fake_python(tmp_path, RECORDING_WORKER)
    run = runner(tmp_path, 1)
    outcome = RunOutcome()
    side_by_side([lambda n=n: run.run(job(), env, n, outcome) for n in ("one", "two")])
    a, b = sorted([span(tmp_path / "runs" / "one"), span(tmp_path / "runs" / "two")])
    assert a[1] <= b[0]
    assert all(outcome.workers[n].wall_s < 3.0 for n in ("one", "two"))  # ~1.5 s each, not the other's wait


def test_a_failed_worker_stops_the_ones_still_waiting_but_never_an_engine(tmp_path):
    (tmp_path / "f").mkdir()
    failing, ok = fake_python(tmp_path / "f", FAILING_WORKER), fake_python(tmp_path, RECORDING_WORKER)
    run = runner(tmp_path, 1)
    outcome = RunOutcome()
    assert not run.run(job(), failing, "base", outcome, engine=True).ok
    assert run.run(job(), ok, "reference-base", outcome) is None  # not started
    assert run.run(job(), ok, "patched", outcome, engine=True).ok  # an engine runs whatever the other did
    assert list(outcome.workers) == ["base", "patched"]
