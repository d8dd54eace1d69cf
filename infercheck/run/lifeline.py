"""A worker never outlives its harness (docs/reliability.md, "Cancellation").

The harness opens a pipe per subprocess and keeps the write end; the subprocess inherits the read
end (its number in LIFELINE_FD) and watches it on a daemon thread. Nothing is ever
written: the read returns end-of-file only when every copy of the write end is closed, that is
when the harness has exited, however it ended (SIGKILL included). The subprocess then kills its
own process group (the worker and whatever it started), since nobody is left to read its results;
the finished groups' rows are already on disk, so `--resume` reuses them.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Callable

LIFELINE_ENV = "LIFELINE_FD"  # neutral: the worker's environment names nothing of the harness (run/view.py)


class Lifeline:
    """The harness's side, a context around one subprocess: the read end goes to the child
    (pass_fds=(read_fd,), and env() names it); leaving the context closes both ends."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()  # non-inheritable: only pass_fds hands the read end on

    def env(self) -> dict[str, str]:
        return {LIFELINE_ENV: str(self.read_fd)}

    def __enter__(self) -> "Lifeline":
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in (self.read_fd, self.write_fd):
            try:
                os.close(fd)
            except OSError:
                pass


def watch_harness(on_gone: Callable[[], None] | None = None) -> bool:
    """In the subprocess: start the watcher if the harness passed a lifeline. Returns whether it did."""
    raw = os.environ.get(LIFELINE_ENV)
    if not raw:
        return False
    try:
        fd = int(raw)
        os.fstat(fd)
    except (ValueError, OSError):
        return False  # not ours (an env var copied by hand): nothing to watch

    def watch() -> None:
        try:
            while os.read(fd, 1):
                pass
        except OSError:
            pass
        (on_gone or stop_own_group)()

    threading.Thread(target=watch, name="infercheck-lifeline", daemon=True).start()
    return True


def stop_own_group() -> None:
    os.killpg(os.getpgrp(), signal.SIGKILL)
