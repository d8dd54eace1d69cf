"""Workers as Ray tasks (run/ray_pool.py) on a local Ray instance, with stand-in worker scripts (no
engine: these claim no verdict; tests/engine/test_ray.py runs real engines under Ray)."""

from __future__ import annotations

import json
import signal
import threading
import time

import pytest

from infercheck.run.cancel import Cancel, Cancelled
from infercheck.run.slots import THREADS_VAR
from tests.conftest import ray_or_skip, skip_where_ray_cannot_start
from tests.unit.test_launcher import fake_python, job, lock_free_within

RECORDING_WORKER = ("echo \"$OMP_NUM_THREADS\" > threads; grep Cpus_allowed_list /proc/self/status | cut -f2 > cpus; "
                    "echo '{\"state\": \"done\"}' > status.json")


@pytest.fixture(scope="module")
def local_ray():
    ray_or_skip()
    import ray

    from infercheck.errors import InfercheckError
    from infercheck.run.ray_pool import connect

    try:
        connect("local")
    except InfercheckError as exc:
        skip_where_ray_cannot_start(str(exc))
        raise
    yield
    ray.shutdown()


def test_a_worker_runs_as_a_ray_task_with_the_slots_thread_count(local_ray, tmp_path):
    from infercheck.run.ray_pool import RAY_TASK, RayPool

    before = signal.getsignal(signal.SIGTERM)
    pool = RayPool("local", 2, "cpu", tmp_path / "locks")
    assert signal.getsignal(signal.SIGTERM) is before  # ray.init's own handler is taken back
    env = fake_python(tmp_path, RECORDING_WORKER)
    with pool.placed(env) as placed:
        assert placed.env[THREADS_VAR] == str(pool.threads) and not placed.cpus  # its CPUs are taken on its node
        run = pool.launch(job(), placed, tmp_path / "out", 60.0)
    assert run.ok, run.error
    assert (tmp_path / "out" / "threads").read_text().strip() == str(pool.threads)
    cpus = (tmp_path / "out" / "cpus").read_text().strip()  # pinned as a slot pins: "0", or "0-1" for two
    assert len(cpus.replace("-", ",").split(",")) == min(pool.threads, 2)
    assert json.loads((tmp_path / "out" / RAY_TASK).read_text())["node"]  # a Ray task ran it


def test_a_cancelled_run_stops_its_ray_task_and_the_worker(local_ray, tmp_path):
    from infercheck.run.ray_pool import RayPool

    cancel = Cancel()
    pool = RayPool("local", 2, "cpu", tmp_path / "locks", cancel)
    env = fake_python(tmp_path, "flock child.lock sleep 300 & sleep 300")
    lock = tmp_path / "out" / "child.lock"
    threading.Thread(target=lambda: (wait_until(lock.exists), cancel.requested.set()), daemon=True).start()
    started = time.time()
    with pytest.raises(Cancelled):
        pool.launch(job(), pool.identity(env), tmp_path / "out", 600.0)
    assert time.time() - started < 60
    assert lock_free_within(lock, seconds=30)  # the Ray worker died, its lifeline closed, the group went


def wait_until(ready, timeout_s: float = 60.0) -> None:
    deadline = time.time() + timeout_s
    while not ready() and time.time() < deadline:
        time.sleep(0.05)


def test_without_ray_the_option_says_how_to_get_it(monkeypatch):
    import builtins

    from infercheck.errors import InfercheckError
    from infercheck.run import ray_pool

    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray":
            raise ImportError("no ray")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(InfercheckError, match=r"pip install 'infercheck\[ray\]'"):
        ray_pool.connect("local")
