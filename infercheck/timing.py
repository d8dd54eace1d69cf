"""Where a run's time went (docs/design.md, "Where the time goes"): per worker, the harness's wall
time on it and the parts the worker's own clocks account for. Pure records, stored in results.json
(`ValidationRun.timing`); `infercheck/breakdown.py` builds them from a run's stored rows.

Engine work is generation (base and patched) and reference scoring (the HF reference): what the
engines are there for. Everything else (imports, engine construction, lm-eval, process and view
set-up, teardown, the cache) is fixed cost. A group reused from the cache costs this run nothing
beyond copying its rows: its times, those of the run that computed it, are kept apart (`reused_s`),
never added to this run's.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, field, fields
from enum import StrEnum


class WorkerRole(StrEnum):
    ENGINE = "engine"  # a vLLM worker (base, patched): its engine work is generation
    REFERENCE = "reference"  # the HF reference: its engine work is scoring
    PYTEST = "pytest"  # the pytest symptom in one variant's env: its wall only


@dataclass
class Seconds:
    """One worker's time in this run, in parts (or a sum of workers')."""

    wall_s: float = 0.0  # the harness's time on the worker: cache look-up, the subprocess, cached rows joined
    import_s: float = 0.0  # the interpreter's start-up, the worker code's, the engine's and lm-eval's imports
    engine_start_s: float = 0.0  # engine construction (vLLM) or model load (HF), every group
    generation_s: float = 0.0
    scoring_s: float = 0.0  # reference scoring
    lm_eval_s: float = 0.0
    other_s: float = 0.0  # wall - the parts above: process and view set-up, engine teardown, rows, the cache
    reused_s: float = 0.0  # what the reused groups cost in the runs that computed them: not part of wall_s

    @property
    def engine_work_s(self) -> float:
        return round(self.generation_s + self.scoring_s, 3)

    @property
    def engine_share(self) -> float | None:
        """Engine work / wall; None where the worker took no time (everything reused)."""
        return self.engine_work_s / self.wall_s if self.wall_s > 0 else None

    def rounded(self) -> Seconds:
        return Seconds(*(round(float(v), 3) for v in astuple(self)))

    def __add__(self, other: Seconds) -> Seconds:
        return Seconds(*(a + b for a, b in zip(astuple(self), astuple(other)))).rounded()


PARTS = tuple(f.name for f in fields(Seconds))


@dataclass
class GroupTime:
    """One engine group's times, as its row recorded them (a reused group's: the computing run's)."""

    name: str
    import_s: float = 0.0
    engine_start_s: float = 0.0
    work_s: float = 0.0  # generation (an engine worker) or reference scoring (the reference)
    lm_eval_s: float = 0.0
    reused: bool = False

    @property
    def total_s(self) -> float:
        return round(self.import_s + self.engine_start_s + self.work_s + self.lm_eval_s, 3)


@dataclass
class WorkerTime:
    worker: str  # the run folder's name for it (base, reference-patched, pytest-base, ...)
    role: WorkerRole
    seconds: Seconds = field(default_factory=Seconds)
    worker_wall_s: float = 0.0  # the worker's own clock, interpreter start to end (0: no worker ran)
    groups: list[GroupTime] = field(default_factory=list)

    @property
    def reused_groups(self) -> int:
        return sum(g.reused for g in self.groups)

    @property
    def all_reused(self) -> bool:
        """Nothing ran: every group came from the cache (the worker costs ~0 in this run)."""
        return bool(self.groups) and self.reused_groups == len(self.groups)


@dataclass
class TimeBreakdown:
    workers: list[WorkerTime] = field(default_factory=list)  # in the order they ran; empty: not recorded

    def total(self) -> Seconds:
        """Every worker's parts added up."""
        return sum((w.seconds for w in self.workers), Seconds())
