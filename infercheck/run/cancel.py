"""Cancelling a run whose workers run in threads (docs/reliability.md, "Cancellation").

A signal (Ctrl-C, SIGTERM, SIGHUP) reaches only the harness's main thread, while workers are
started and waited on by other threads (infercheck/execute.py; bench's streams). The main thread
catches the interruption where it waits on those threads (`results_or_cancel`): it marks the run
cancelled — a thread about to start a worker then skips it (execute.Runner.placed) and a validate
whose workers were stopped ends without grading (`Cancelled`) — and stops the process group of
every subprocess of the harness until no thread is left, then lets the interruption go on.
"""

from __future__ import annotations

import os
import signal
import threading
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from typing import Any, Sequence

import psutil

POLL_S = 0.2  # how often the stopping thread sweeps the harness's subprocesses
GRACE_S = 2.0  # SIGTERM, then SIGKILL what is left after this long


class Cancelled(BaseException):
    """Raised in a thread whose run was cancelled: not an error of the candidate (bench's `attempt`
    must not record it), so not an Exception."""


@dataclass
class Cancel:
    """One harness invocation's cancellation, shared by every run it starts (a bench's streams too)."""

    requested: threading.Event = field(default_factory=threading.Event)

    @property
    def is_set(self) -> bool:
        return self.requested.is_set()

    def raise_if_set(self) -> None:
        if self.requested.is_set():
            raise Cancelled()

    def stop(self, futures: Sequence[Future]) -> None:
        """Mark the run cancelled and stop the harness's subprocesses until every future has ended."""
        self.requested.set()
        pending = [f for f in futures if not f.done()]
        while pending:
            stop_subprocesses()
            _, not_done = wait(pending, timeout=POLL_S)
            pending = list(not_done)


def results_or_cancel(futures: Sequence[Future], cancel: Cancel) -> list[Any]:
    """Each future's result in order; if the waiting thread is interrupted (Ctrl-C, or SIGTERM and
    SIGHUP as cli.py raises them), the run is cancelled (Cancel.stop) before the interruption goes
    on. A future's own error is not an interruption: it is raised as it is, the other threads go on."""
    try:
        return [f.result() for f in futures]
    except KeyboardInterrupt:
        cancel.stop(futures)
        raise


def stop_subprocesses(grace_s: float = GRACE_S) -> None:
    """SIGTERM the process group of each child of this process that leads one (every worker and
    pytest run does: run/launcher.py starts them in a session of their own; a short probe in the
    harness's own group ends by itself), then SIGKILL whatever is left after grace_s."""
    groups = [child for child in psutil.Process().children() if group_of(child.pid) == child.pid]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for leader in groups:
            try:
                os.killpg(leader.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        _, groups = psutil.wait_procs(groups, timeout=grace_s)
        if not groups:
            return


def group_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None
