"""Parity tolerances from a measured noise floor (docs/design.md, "Noise floor"), over plain results.

The floor of a workload (a parity suite or the parity symptom) is what the unmodified engine — the
engine tree without base patches or candidate — shows on that workload's own prompts when nothing is
wrong: its teacher-forced parity against the reference, and its parity against itself when the same
requests run in another batch composition (alone, in reverse order). The floor of every error metric
is measured and shown; the metrics suites/noise_floor.yaml lists (max |Δlogprob|: KL on a lumped
tail is not, see there) get a threshold of the floor times a documented multiple, clamped between a
per-dtype minimum (a floor of exactly zero must not make the check fail on one ulp) and the dtype's
table value (suites/tolerances.yaml): a floor can tighten a tolerance, never loosen it — an
unmodified engine that itself carries the bug would otherwise lift its own threshold over it. No
floor measured (a run from before the floor, a failed floor worker, a workload the floor run lacks):
the table value, and the report says why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from infercheck.checks.parity import RequestParity, parity_stats, teacher_forced
from infercheck.paths import SUITES_DIR
from infercheck.run.job import RequestResult
from infercheck.yamlio import read_yaml

MEASURED = ("max_kl", "mean_kl", "max_abs_dlogprob")  # the profile's error metrics (agreement stays the table's)
SETTINGS_FILE = SUITES_DIR / "noise_floor.yaml"


@dataclass(frozen=True)
class FloorSettings:
    """How a threshold follows from a floor, for the metrics in `minimum`: `multiple` × floor, never
    under `minimum[metric]` nor over the dtype table's value."""

    multiple: float
    minimum: dict[str, float]  # floored metric -> its minimum threshold

    @classmethod
    def load(cls, dtype: str, path: Path = SETTINGS_FILE) -> "FloorSettings | None":
        """The settings for a dtype; None where the file names none for it (the table alone)."""
        data = read_yaml(path)
        minimum = (data.get("minimum") or {}).get(dtype)
        if minimum is None:
            return None
        return cls(float(data["multiple"]), {k: float(minimum[k]) for k in data["floored"]})


@dataclass(frozen=True)
class NoiseFloor:
    """One workload's measured floor per metric: the worst of the unmodified engine against the
    reference and against itself in another batch composition."""

    workload: str
    vs_reference: dict[str, float]
    vs_itself: dict[str, float]
    positions: int  # teacher-forced positions of the reference comparison
    self_positions: int  # positions the two compositions share (up to the first token they differ)

    def value(self, metric: str) -> float:
        return max(self.vs_reference[metric], self.vs_itself[metric])


@dataclass(frozen=True)
class Tolerance:
    """The profile one parity check is judged against, and where each of its numbers came from."""

    profile: dict[str, float]  # the thresholds (the table's keys)
    table: dict[str, float]  # the dtype's table values
    floor: dict[str, float] = field(default_factory=dict)  # metric -> measured floor; empty: none measured
    note: str = ""  # how the floor was measured, or why there is none


def metrics(rows: list[RequestParity]) -> dict[str, float]:
    stats = parity_stats(rows)
    return {"max_kl": stats.max_kl, "mean_kl": stats.mean_kl, "max_abs_dlogprob": stats.max_abs_dlogprob}


def common_prefix(result: RequestResult, other: RequestResult) -> RequestResult:
    """`result` cut to the output tokens it shares with `other` (past a differing token the two
    contexts differ and their logprobs compare nothing)."""
    n = 0
    while n < min(len(result.output_ids), len(other.output_ids)) and result.output_ids[n] == other.output_ids[n]:
        n += 1
    return replace(result, output_ids=result.output_ids[:n], logprobs=(result.logprobs or [])[:n],
                   chosen_logprobs=(result.chosen_logprobs or [])[:n])


def measure(workload: str, batched: list[RequestResult], alone: list[RequestResult],
            references: dict[str, RequestResult], near_tie: float) -> NoiseFloor | None:
    """The floor of one workload from the unmodified engine's results in two batch compositions and
    the reference's scoring of the batched ones; None when nothing could be compared."""
    to_ref = teacher_forced(batched, references, near_tie)
    by_id = {r.id: r for r in batched}
    pairs = [(r, by_id[r.id]) for r in alone if r.id in by_id]
    to_self = teacher_forced([common_prefix(a, b) for a, b in pairs],
                             {b.id: common_prefix(b, a) for a, b in pairs}, near_tie)
    positions = sum(len(r.positions) for r in to_ref)
    if positions == 0:
        return None
    zero = dict.fromkeys(MEASURED, 0.0)
    return NoiseFloor(workload, metrics(to_ref), metrics(to_self) if to_self else zero, positions,
                      sum(len(r.positions) for r in to_self))


def threshold(table: float, floor: float, minimum: float, multiple: float) -> float:
    """multiple × floor within [minimum, table]; a floor that is not finite gives the table."""
    if not math.isfinite(floor):
        return table
    return min(table, max(minimum, multiple * floor))


def tolerance(table: dict[str, float], floor: NoiseFloor | None, settings: FloorSettings | None,
              missing: str = "no floor measured") -> Tolerance:
    """The profile a workload's parity check is judged against (module docstring)."""
    if settings is None:
        return Tolerance(dict(table), dict(table), {}, "no floor settings for this dtype: the table's values")
    if floor is None:
        return Tolerance(dict(table), dict(table), {}, f"{missing}: the table's values")
    values = {m: floor.value(m) for m in MEASURED}
    profile = dict(table)
    for m, minimum in settings.minimum.items():
        profile[m] = threshold(table[m], values[m], minimum, settings.multiple)
    others = [m for m in MEASURED if m not in settings.minimum]
    note = (f"{', '.join(settings.minimum)}: {settings.multiple:g} × the unmodified engine's floor on these prompts "
            f"({floor.positions} positions vs the reference; {floor.self_positions} vs itself alone in reverse "
            f"order), within [per-dtype minimum, table]" + (f"; {', '.join(others)}: the table's" if others else ""))
    return Tolerance(profile, dict(table), values, note)
