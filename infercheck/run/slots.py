"""Where workers run: a pool of CPU slots shared by every infercheck process on the machine
(docs/design.md, "Running workers side by side").

`--jobs N` splits the CPUs this process may use into N slots of equal size; a worker (an engine, the
HF reference, a pytest run) takes a slot for as long as its subprocess runs, is pinned to the slot's
CPUs and runs `threads` OpenMP threads. A slot is held through one advisory file lock per CPU in the
cache, so several runs sharing a machine (a bench's case streams, two validates, a CI job beside a
person's run) never put two workers on one CPU. On a tiny model a worker is one Python thread of
scheduling plus small matrix products: measured on a 2-core machine, a mixed job took 59 s alone
with two threads, and 48 s and 50 s for two copies side by side with one thread each.

The thread count is part of a worker's identity (cache keys: it may change reduction order); which
CPUs it sits on is not. On CUDA a slot is a turn on the device (one by default): engines on one GPU
each reserve their share of its memory.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, ContextManager, Iterator

from infercheck.build.engine_env import EngineEnv
from infercheck.errors import InfercheckError
from infercheck.run.cancel import Cancel
from infercheck.run.job import Job
from infercheck.run.launcher import Watch, WorkerRun, launch

THREADS_VAR = "OMP_NUM_THREADS"
WORKER_MEMORY_BYTES = 6 * 1024**3  # what one worker may take beside the others (tiny models use ~2-3 GiB)
MAX_DEFAULT_JOBS = 4  # a validate has at most 3-4 workers that can overlap
POLL_S = 0.2

# A caller's way to run a worker somewhere: env -> a context holding a slot, yielding the env placed in it.
Placement = Callable[[EngineEnv], ContextManager[EngineEnv]]


def usable_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this platform: every CPU the OS counts
        return list(range(os.cpu_count() or 1))


def available_memory_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def default_jobs(device: str) -> int:
    """One slot per CPU, bounded by memory (WORKER_MEMORY_BYTES each) and MAX_DEFAULT_JOBS; one on CUDA."""
    if device != "cpu":
        return 1
    memory = available_memory_bytes()
    by_memory = memory // WORKER_MEMORY_BYTES if memory is not None else MAX_DEFAULT_JOBS
    return max(1, min(len(usable_cpus()), by_memory, MAX_DEFAULT_JOBS))


@dataclass(frozen=True)
class Slot:
    index: int
    cpus: tuple[int, ...]  # empty on CUDA: the slot is a turn on the device
    threads: int

    def place(self, env: EngineEnv) -> EngineEnv:
        """The env a worker in this slot runs: pinned to its CPUs, `threads` OpenMP threads."""
        return replace(with_threads(env, self.threads), cpus=self.cpus)


def with_threads(env: EngineEnv, threads: int) -> EngineEnv:
    return replace(env, env={**env.env, THREADS_VAR: str(threads)}) if threads else env


class SlotPool:
    """`jobs` slots over this process's CPUs (or `jobs` turns on a CUDA device), held machine-wide
    through lock files under `lock_dir`; threads of one process are served in the order they ask."""

    def __init__(self, jobs: int, device: str, lock_dir: Path, cancel: Cancel | None = None) -> None:
        if jobs < 1:
            raise InfercheckError(f"--jobs {jobs}: expected 1 or more")
        self.device = device
        self.lock_dir = lock_dir
        self.cancel = cancel  # a waiting thread gives up (Cancelled) once it is set (run/cancel.py)
        if device == "cpu":
            cpus = usable_cpus()
            jobs = min(jobs, len(cpus))
            per = len(cpus) // jobs
            self.slots = [Slot(i, tuple(cpus[i * per:(i + 1) * per]), per) for i in range(jobs)]
        else:
            self.slots = [Slot(i, (), 0) for i in range(jobs)]
        self.turns = threading.Condition()
        self.queue: list[int] = []
        self.tickets = 0

    @property
    def threads(self) -> int:
        return self.slots[0].threads

    def identity(self, env: EngineEnv) -> EngineEnv:
        """The env as its cache key sees it in this pool: with the slot's thread count, no CPUs."""
        return with_threads(env, self.threads)

    def lock_names(self, slot: Slot) -> list[str]:
        return [f"cpu-{c}.lock" for c in slot.cpus] if slot.cpus else [f"{self.device}-{slot.index}.lock"]

    def try_take(self, slot: Slot) -> list | None:
        """Every lock of the slot, or none of them."""
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        held = []
        for name in self.lock_names(slot):
            handle = open(self.lock_dir / name, "a+")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                release(held)
                return None
            held.append(handle)
        return held

    @contextlib.contextmanager
    def slot(self) -> Iterator[Slot]:
        """A free slot, held for the block; waits (first come, first served within the process)."""
        with self.turns:
            ticket = self.tickets
            self.tickets += 1
            self.queue.append(ticket)
        try:
            taken = self.wait_for_slot(ticket)
        finally:
            with self.turns:
                self.queue.remove(ticket)
                self.turns.notify_all()
        slot, held = taken
        try:
            yield slot
        finally:
            release(held)
            with self.turns:
                self.turns.notify_all()

    def wait_for_slot(self, ticket: int) -> tuple[Slot, list]:
        while True:
            if self.cancel is not None:
                self.cancel.raise_if_set()
            with self.turns:
                if self.queue[0] == ticket:
                    for slot in self.slots:
                        held = self.try_take(slot)
                        if held is not None:
                            return slot, held
                self.turns.wait(POLL_S)  # a slot freed here notifies; one freed by another process is polled

    @contextlib.contextmanager
    def placed(self, env: EngineEnv) -> Iterator[EngineEnv]:
        """A Placement: env placed in a free slot for the block."""
        with self.slot() as slot:
            yield slot.place(env)

    def launch(self, job: Job, env: EngineEnv, out_dir: Path, timeout_s: float, watch: Watch | None = None) -> WorkerRun:
        """A Launcher (run/launcher.py): the placed worker runs here."""
        return launch(job, env, out_dir, timeout_s, watch)


def release(held: list) -> None:
    for handle in held:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def unplaced(env: EngineEnv) -> ContextManager[EngineEnv]:
    """The Placement of a caller without a pool: the env as it is."""
    return contextlib.nullcontext(env)
