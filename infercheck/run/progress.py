"""A worker's live progress: the worker writes `progress.json` in its folder as requests finish (a
temp file and a rename, at most a few times a second); the launcher reads it while it waits and
hands it to whoever shows it (infercheck/console.py). Progress is for people only: nothing graded
reads it, and a missing or torn file is no progress, never an error.

A request counts once it is finished: one per prompt, one per turn of an agent session. An lm-eval
group has no requests of the harness's own; it shows as its group with nothing to count.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable

PROGRESS = "progress.json"
WRITE_EVERY_S = 0.5


@dataclass(frozen=True)
class WorkerProgress:
    """Where a worker is: the group it runs (1-based index of `groups`), and requests finished out
    of the job's total (every group's), `started` as the worker's wall clock when it began."""

    group: str = ""  # "" while the worker starts (imports, before its first group)
    index: int = 0
    groups: int = 0
    done: int = 0
    total: int = 0
    started: float = 0.0

    @staticmethod
    def read(folder: Path) -> WorkerProgress | None:
        """The progress in `folder`, or None where there is none (not started, torn, another shape)."""
        try:
            data = json.loads((folder / PROGRESS).read_text())
            return WorkerProgress(**data) if isinstance(data, dict) else None
        except (OSError, ValueError, TypeError):
            return None


def expected_results(requests: list[Any]) -> int:
    """Finished requests a group reports: one per prompt, one per turn of a session."""
    return sum(len(r.turns) if r.turns else 1 for r in requests)


class ProgressWriter:
    """Kept by the worker: `start_group` at each group, `finished` per request (from the backends)."""

    def __init__(self, out: Path, groups: list[Any], clock: Callable[[], float] = time.monotonic) -> None:
        self.out, self.clock, self.last = out, clock, -WRITE_EVERY_S
        self.state = WorkerProgress(groups=len(groups), total=sum(expected_results(g.requests) for g in groups),
                                    started=time.time())
        self.write(force=True)

    def start_group(self, index: int, name: str) -> None:
        self.state = replace(self.state, group=name, index=index)
        self.write(force=True)

    def finished(self, count: int = 1) -> None:
        self.state = replace(self.state, done=min(self.state.total, self.state.done + count))
        self.write(force=self.state.done == self.state.total)

    def write(self, force: bool = False) -> None:
        now = self.clock()
        if not force and now - self.last < WRITE_EVERY_S:
            return
        self.last = now
        tmp = self.out / f".{PROGRESS}.tmp"
        try:
            tmp.write_text(json.dumps(asdict(self.state)))
            tmp.replace(self.out / PROGRESS)
        except OSError:  # progress is for people: a full disk stops the rows, not this
            pass


def reporting_tqdm(finished: Callable[[], None]) -> Callable[..., Any]:
    """A tqdm factory for vLLM's `use_tqdm`: the bar draws nowhere and every finished request it is
    told of calls `finished` (vLLM updates its bar once per finished request, by its completions)."""
    import io

    from tqdm import tqdm

    class Reporting(tqdm):  # type: ignore[misc]
        def update(self, n: float | None = 1) -> bool | None:
            finished()
            return super().update(n)

    return lambda *args, **kwargs: Reporting(*args, file=io.StringIO(), **kwargs)
