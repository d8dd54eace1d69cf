"""Console helpers shared by the commands: progress on stderr (stage lines, live worker lines on a
terminal) and `K=V` engine arguments."""

from __future__ import annotations

import json
import sys
from typing import Any, Callable, TextIO

from infercheck.errors import InfercheckError
from infercheck.run.progress import WorkerProgress

Progress = Callable[[str], None]


def progress(message: str) -> None:
    print(f"[infercheck] {message}", file=sys.stderr, flush=True)


class LiveWorkers:
    """One live line per running worker on a terminal (rich): its group, requests finished of the
    job's total, elapsed time; gone when the worker ends. Stage lines print above the bars."""

    def __init__(self, stream: TextIO) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bars = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                             TextColumn("requests"), TimeElapsedColumn(),
                             console=Console(file=stream, highlight=False), transient=True)
        self.tasks: dict[str, Any] = {}

    def watch(self, name: str) -> Callable[[WorkerProgress], None]:
        """The launcher's `watch` for worker `name`."""
        def show(state: WorkerProgress) -> None:
            if name not in self.tasks:
                self.tasks[name] = self.bars.add_task(name, total=None)
            self.bars.update(self.tasks[name], description=describe(name, state), completed=state.done,
                             total=state.total or None)
        return show

    def finish(self, name: str) -> None:
        task = self.tasks.pop(name, None)
        if task is not None:
            self.bars.remove_task(task)

    def line(self, message: str) -> None:
        self.bars.console.print(message, markup=False)


def describe(name: str, state: WorkerProgress) -> str:
    """`run base · group 3/12 prefix-cache` (or `· starting` before the first group)."""
    where = f"group {state.index}/{state.groups} {state.group}" if state.group else "starting"
    return f"run {name} · {where}"


class Console:
    """How a long command tells people where it is, on stderr and never on stdout (which --json
    keeps for itself): stage lines ("run base: ok in 66.6s"), and on a terminal a live line per
    running worker. `quiet`: nothing. Called with a message, it prints a stage line (a Progress);
    `live` is None where no live lines are shown (not a terminal, or quiet). A context manager: the
    live lines run inside it."""

    def __init__(self, quiet: bool = False, stream: TextIO | None = None, live: bool | None = None) -> None:
        self.stream, self.quiet = stream or sys.stderr, quiet
        wanted = self.stream.isatty() if live is None else live
        self.live: LiveWorkers | None = LiveWorkers(self.stream) if wanted and not quiet else None

    def __call__(self, message: str) -> None:
        if self.quiet:
            return
        if self.live is not None:
            self.live.line(f"[infercheck] {message}")
        else:
            print(f"[infercheck] {message}", file=self.stream, flush=True)

    def watch(self, name: str) -> Callable[[WorkerProgress], None] | None:
        """The launcher's `watch` for worker `name`, or None where nothing live is shown."""
        return self.live.watch(name) if self.live is not None else None

    def __enter__(self) -> Console:
        if self.live is not None:
            self.live.bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.bars.stop()


def parse_engine_arg(text: str) -> tuple[str, Any]:
    """K=V; V is read as JSON when it parses (numbers, booleans, objects), else as a string."""
    if "=" not in text:
        raise InfercheckError(f"engine arg must be KEY=VALUE, got {text!r}")
    key, raw = text.split("=", 1)
    try:
        return key.strip(), json.loads(raw)
    except json.JSONDecodeError:
        return key.strip(), raw
