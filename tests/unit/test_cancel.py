"""Cancelling runs whose workers run in threads (run/cancel.py): an interruption of the main thread
stops the workers other threads started and starts no further one, in a validate's runner and
across a bench's streams. Stand-in workers (no engine: these claim no verdict)."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import pytest

from infercheck.bench import load_cases, run_bench
from infercheck.paths import PATCHES_DIR
from infercheck.run.cancel import Cancel, Cancelled, results_or_cancel
from infercheck.run.slots import SlotPool
from infercheck.run.store import RunOutcome
from tests.conftest import gone_within
from tests.unit.test_bench import fake_run
from tests.unit.test_launcher import fake_python, job, lock_free_within
from tests.unit.test_slots import runner


def interrupt_once(ready: Callable[[], bool]) -> None:
    """Ctrl-C to the main thread (cli.py turns SIGTERM into the same) once `ready()` holds: a real
    signal, which wakes a thread blocked on a lock as _thread.interrupt_main would not."""
    def interrupt() -> None:
        deadline = time.time() + 20.0
        while not ready() and time.time() < deadline:
            time.sleep(0.05)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
    threading.Thread(target=interrupt, daemon=True).start()


def test_an_interrupted_run_stops_its_running_worker_and_starts_no_other(tmp_path):
    env = fake_python(tmp_path, "flock child.lock sleep 300 & sleep 300")  # hangs, with a child of its own
    run = runner(tmp_path, 1)  # one slot: the second engine waits for the first's
    outcome = RunOutcome()
    started = time.time()
    with ThreadPoolExecutor(max_workers=2) as pool, pytest.raises(KeyboardInterrupt):
        futures = [pool.submit(run.run, job(), env, name, outcome, True) for name in ("base", "patched")]
        interrupt_once(lambda: any((tmp_path / "runs").glob("*/worker.pid")))
        results_or_cancel(futures, run.cancel)
    assert time.time() - started < 60  # not the workers' 300 s
    assert run.cancel.is_set and all(f.done() for f in futures)
    assert len(outcome.workers) == 1  # the running one stopped, the waiting one never started
    (first, record), = outcome.workers.items()
    assert not record.ok and lock_free_within(tmp_path / "runs" / first / "child.lock", seconds=10)


def test_a_thread_waiting_for_a_slot_gives_up_once_cancelled(tmp_path):
    cancel = Cancel()
    pool = SlotPool(1, "cpu", tmp_path / "locks", cancel)
    with pool.slot():
        with ThreadPoolExecutor(max_workers=1) as threads:
            waiting = threads.submit(lambda: pool.slot().__enter__())
            time.sleep(0.3)
            assert not waiting.done()
            cancel.requested.set()
            with pytest.raises(Cancelled):
                waiting.result(timeout=10)


def test_a_future_that_fails_is_not_a_cancellation():
    cancel = Cancel()
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(lambda: 1), pool.submit(lambda: 1 / 0)]
        with pytest.raises(ZeroDivisionError):
            results_or_cancel(futures, cancel)
    assert not cancel.is_set


def test_an_interrupted_bench_stops_every_stream_and_starts_no_further_candidate(tmp_path):
    cases = load_cases(PATCHES_DIR, None)
    calls: list[str] = []
    sleepers: list[int] = []
    both_running = threading.Event()
    lock = threading.Lock()

    def validate(folder: Path):  # a candidate whose worker hangs until stopped
        proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
        with lock:
            calls.append(folder.name)
            sleepers.append(proc.pid)
            if len(sleepers) == 2:
                both_running.set()
        proc.wait()
        folder.mkdir(parents=True, exist_ok=True)
        return fake_run("ERROR"), folder

    interrupt_once(both_running.is_set)
    with pytest.raises(KeyboardInterrupt):
        run_bench(cases, tmp_path, lambda case, cand, folder: folder, validate, lambda m: None, streams=2)
    assert len(calls) == 2  # one candidate per stream, none after the interruption
    assert all(gone_within(pid, 5.0) for pid in sleepers)
