"""Workers as Ray tasks: `--ray` (and `--ray-address ADDRESS`) for validate and bench (docs/design.md, "Ray").

RayPool is a SlotPool (run/slots.py) whose workers are Ray tasks: every engine and reference worker
asks Ray for the slot's CPU count (or one GPU), and on the node Ray picks takes that many CPUs
machine-wide (the slot locks of that node) and runs run/launcher.py's `launch` pinned to them.
Thread counts, and so each worker's identity, cache keys and numbers, are the serial run's, so the
verdicts are too. The content-addressed cache and the run folders stay files at the same
path on every node (one machine, or a shared folder): a group's rows are reused by later runs and
harvested by `--resume` after a stop, which an object store, emptied with the job, would not keep.
The pytest symptom and the engine's own tests run where the harness runs. Ray is an optional extra
(`pip install 'infercheck[ray]'`).
"""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

from infercheck.build.engine_env import EngineEnv
from infercheck.errors import InfercheckError
from infercheck.run.cancel import Cancel, Cancelled
from infercheck.run.job import Job
from infercheck.run.launcher import Watch, WorkerRun, launch
from infercheck.run.progress import WorkerProgress
from infercheck.run.slots import POLL_S, SlotPool, usable_cpus, with_threads

LOCAL = "local"  # `--ray` without `--ray-address`: a Ray instance of this machine, started for the run
OBJECT_STORE_BYTES = 128 * 1024**2  # only small records travel through it (each worker's WorkerRun)
FORWARDED = ("INFERCHECK_CACHE", "HF_HOME", "HF_HUB_OFFLINE")  # what a worker on another node must see alike


def connect(address: str) -> Any:
    """The ray module, connected to `address` (LOCAL: a new local instance with this machine's CPUs).
    ray.init installs its own SIGTERM handler; the harness's (cli.py) are put back."""
    try:
        import ray
    except ImportError:
        raise InfercheckError("--ray needs Ray: pip install 'infercheck[ray]'") from None
    if ray.is_initialized():
        return ray
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        if address == LOCAL:
            ray.init(address="local", num_cpus=len(usable_cpus()), include_dashboard=False, log_to_driver=False,
                     logging_level="ERROR", object_store_memory=OBJECT_STORE_BYTES)
        else:
            ray.init(address=address, log_to_driver=False, logging_level="ERROR",
                     runtime_env={"env_vars": {k: os.environ[k] for k in FORWARDED if k in os.environ}})
    except Exception as exc:  # Ray's own errors (no cluster at the address, a refused start) are many
        raise InfercheckError(f"--ray {address}: Ray could not start or connect: "
                              f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    return ray


RAY_TASK = "ray-task.json"  # in a worker folder: the Ray node and task that ran the worker


def launch_as_task(job: Job, env: EngineEnv, out_dir: Path, timeout_s: float, threads: int, device: str,
                   lock_dir: Path, driver_node: str) -> WorkerRun:
    """In the Ray task: say where it runs, take `threads` CPUs of this node machine-wide, as a slot
    of run/slots.py does (vLLM's CPU build binds its OpenMP threads to the CPUs it may use, so an
    unpinned worker would run another thread count than the serial run), and launch the worker."""
    import json

    import ray

    context = ray.get_runtime_context()
    node = context.get_node_id()
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / RAY_TASK).write_text(json.dumps({"node": node, "task": context.get_task_id()}))
    if device != "cpu":
        return launch(job, env, out_dir, timeout_s)
    # the harness's node shares the harness's slot locks; another node's CPUs are its own
    locks = lock_dir if node == driver_node else lock_dir / f"node-{node[:16]}"
    slots = SlotPool(max(1, len(usable_cpus()) // max(threads, 1)), device, locks)
    with slots.slot() as slot:
        return launch(job, replace(env, cpus=slot.cpus[:threads]), out_dir, timeout_s)


class RayPool(SlotPool):
    """A SlotPool whose workers run as Ray tasks (module docstring)."""

    def __init__(self, address: str, jobs: int, device: str, lock_dir: Path, cancel: Cancel | None = None) -> None:
        super().__init__(jobs, device, lock_dir, cancel)
        self.address = address
        self.ray = connect(address)
        self.remote = self.ray.remote(max_retries=0)(launch_as_task)
        self.driver_node = self.ray.get_runtime_context().get_node_id()

    @contextlib.contextmanager
    def placed(self, env: EngineEnv) -> Iterator[EngineEnv]:
        """The env with the slot's thread count; its CPUs are taken in the task, on its node."""
        if self.cancel is not None:
            self.cancel.raise_if_set()
        yield with_threads(env, self.threads)

    def resources(self) -> dict[str, float]:
        return {"num_cpus": float(self.threads)} if self.device == "cpu" else {"num_cpus": 1.0, "num_gpus": 1.0}

    def launch(self, job: Job, env: EngineEnv, out_dir: Path, timeout_s: float, watch: Watch | None = None) -> WorkerRun:
        """A Launcher: the worker as a Ray task; the harness's cancel stops it (ray.cancel, force)."""
        ref = self.remote.options(**self.resources()).remote(job, env, out_dir, timeout_s, self.threads, self.device,
                                                             self.lock_dir, self.driver_node)
        while True:
            ready, _ = self.ray.wait([ref], timeout=POLL_S)
            if ready:
                return self.ray.get(ref)
            if self.cancel is not None and self.cancel.is_set:
                self.ray.cancel(ref, force=True)
                raise Cancelled()
            state = WorkerProgress.read(out_dir) if watch is not None else None
            if state is not None:
                watch(state)
