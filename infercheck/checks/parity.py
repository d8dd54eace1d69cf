"""Numerical parity of an engine against the reference, over plain stored results.

Two views:
- free-running greedy (`compare_greedy`): do the engine and the reference generate the same tokens?
- teacher-forced (`teacher_forced`): the reference re-scores the engine's own continuation, so every
  position is compared even after a divergence. Per position: KL(ref || engine) on the engine's
  top-k with the tail lumped, |Δlogprob| of the chosen token, top-1 agreement, and the first real
  divergence — a flip between two tokens whose reference logprobs are within a near-tie margin
  is not a failure.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Iterable

from infercheck.payloads import PositionSeries
from infercheck.run.job import RequestResult

TAIL_FLOOR = 1e-12
MAX_POINTS = 512  # points of a stored per-position series (payloads.PositionSeries)


@dataclass(frozen=True)
class SequenceParity:
    id: str
    tokens_equal: bool
    first_divergence: int | None  # first output position where the tokens differ
    max_abs_dlogprob: float  # chosen-token |Δlogprob| over the common prefix
    positions: int


@dataclass(frozen=True)
class ParitySummary:
    requests: int
    tokens_equal: int
    max_abs_dlogprob: float
    first_divergences: dict[str, int]

    @property
    def all_equal(self) -> bool:
        return self.tokens_equal == self.requests


def worst(values: Iterable[float]) -> float:
    """The largest error; a NaN anywhere makes it infinite (max() would let it slip past)."""
    values = list(values)
    return math.inf if any(math.isnan(v) for v in values) else max(values, default=0.0)


def compare_sequence(engine: RequestResult, reference: RequestResult) -> SequenceParity:
    a, b = engine.output_ids, reference.output_ids
    common = 0
    while common < min(len(a), len(b)) and a[common] == b[common]:
        common += 1
    diverged = None if (common == len(a) == len(b)) else common
    deltas = [abs(x - y) for x, y in zip((engine.chosen_logprobs or [])[:common],
                                         (reference.chosen_logprobs or [])[:common])]
    return SequenceParity(engine.id, diverged is None, diverged, worst(deltas), common)


def compare_greedy(engine: list[RequestResult], reference: list[RequestResult]) -> list[SequenceParity]:
    """Pair results by request id; a request missing on either side is a divergence at 0."""
    ref_by_id = {r.id: r for r in reference}
    out = []
    for result in engine:
        ref = ref_by_id.get(result.id)
        if ref is None:
            out.append(SequenceParity(result.id, False, 0, float("inf"), 0))
        else:
            out.append(compare_sequence(result, ref))
    return out


def summarize(rows: list[SequenceParity]) -> ParitySummary:
    return ParitySummary(
        requests=len(rows),
        tokens_equal=sum(r.tokens_equal for r in rows),
        max_abs_dlogprob=worst(r.max_abs_dlogprob for r in rows),
        first_divergences={r.id: r.first_divergence for r in rows if r.first_divergence is not None},
    )


# ---------------------------------------------------------------- teacher-forced

@dataclass(frozen=True)
class PositionParity:
    kl: float
    abs_dlogprob: float
    agree: bool  # engine's chosen token is the reference's best
    near_tie: bool  # disagreement within the near-tie margin (not a failure)
    ref_best: int
    ref_gap: float  # reference logprob of its best minus that of the engine's token


def lumped_kl(ref: dict[int, float], engine: dict[int, float]) -> float:
    """KL(ref || engine) over the engine's listed tokens plus one lumped tail bucket."""
    ids = [i for i in engine if i in ref]
    p = [math.exp(ref[i]) for i in ids]
    q = [math.exp(engine[i]) for i in ids]
    kl = sum(pi * (math.log(pi) - math.log(qi)) for pi, qi in zip(p, q) if pi > 0)
    p_tail, q_tail = max(1.0 - sum(p), 0.0), max(1.0 - sum(q), 0.0)
    if p_tail > TAIL_FLOOR:
        kl += p_tail * (math.log(p_tail) - math.log(max(q_tail, TAIL_FLOOR)))
    return max(kl, 0.0)


def position_parity(engine_pos: list[list[float]], ref_pos: list[list[float]], chosen: int,
                    near_tie: float) -> PositionParity:
    engine = {int(t): float(lp) for t, lp in engine_pos}
    ref = {int(t): float(lp) for t, lp in ref_pos}
    ref_best = max(ref, key=ref.get)
    gap = ref[ref_best] - ref.get(chosen, -math.inf)
    agree = ref_best == chosen or gap == 0.0
    if any(math.isnan(lp) or lp == math.inf for lp in engine.values()):  # NaN never compares as "close"
        return PositionParity(math.inf, math.inf, agree, False, ref_best, gap)
    dlp = abs(engine[chosen] - ref[chosen]) if chosen in engine and chosen in ref else math.inf
    return PositionParity(lumped_kl(ref, engine), dlp, agree, (not agree) and gap <= near_tie, ref_best, gap)


@dataclass
class RequestParity:
    id: str
    positions: list[PositionParity]

    @property
    def first_divergence(self) -> int | None:
        return next((i for i, p in enumerate(self.positions) if not p.agree and not p.near_tie), None)


@dataclass
class ParityStats:
    positions: int
    mean_kl: float
    p99_kl: float
    max_kl: float
    top1_agreement: float  # near ties count as agreement
    near_ties: int
    max_abs_dlogprob: float
    first_divergence: int | None  # earliest over requests
    diverged_requests: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def teacher_forced(engine: list[RequestResult], reference: dict[str, RequestResult], near_tie: float) -> list[RequestParity]:
    """Per request: the engine's top-k logprobs vs the reference's scores of the same tokens."""
    out = []
    for result in engine:
        ref = reference.get(result.id)
        if ref is None or result.logprobs is None or ref.logprobs is None:
            continue
        positions = [position_parity(e, r, tok, near_tie)
                     for e, r, tok in zip(result.logprobs, ref.logprobs, result.output_ids)]
        out.append(RequestParity(result.id, positions))
    return out


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = q / 100 * (len(ordered) - 1)
    lo, hi = math.floor(rank), math.ceil(rank)
    if lo == hi or ordered[lo] == ordered[hi]:  # also keeps inf from turning into inf - inf = nan
        return ordered[lo]
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


def parity_stats(rows: list[RequestParity]) -> ParityStats:
    flat = [p for r in rows for p in r.positions]
    kls = [p.kl for p in flat]
    firsts = [r.first_divergence for r in rows if r.first_divergence is not None]
    return ParityStats(
        positions=len(flat),
        mean_kl=sum(kls) / len(kls) if kls else 0.0,
        p99_kl=percentile(kls, 99),
        max_kl=worst(kls),
        top1_agreement=sum(p.agree or p.near_tie for p in flat) / len(flat) if flat else 1.0,
        near_ties=sum(p.near_tie for p in flat),
        max_abs_dlogprob=worst(p.abs_dlogprob for p in flat),
        first_divergence=min(firsts, default=None),
        diverged_requests=[r.id for r in rows if r.first_divergence is not None],
    )


def binned_max(values: list[float], max_points: int = MAX_POINTS) -> tuple[int, list[float]]:
    """(bin width, the worst value of each bin): every value when there are at most `max_points`,
    else equal bins of ceil(len / max_points) values (the last may be shorter). 3 significant digits."""
    width = max(1, math.ceil(len(values) / max_points))
    return width, [float(f"{worst(values[i:i + width]):.3g}") for i in range(0, len(values), width)]


def position_series(rows: list[RequestParity], max_points: int = MAX_POINTS) -> PositionSeries:
    """Per output position, the worst KL and |Δlogprob| over the requests that reach it, binned."""
    length = max((len(r.positions) for r in rows), default=0)
    at = [[r.positions[i] for r in rows if i < len(r.positions)] for i in range(length)]
    width, kl = binned_max([worst(p.kl for p in ps) for ps in at], max_points)
    _, dlogprob = binned_max([worst(p.abs_dlogprob for p in ps) for ps in at], max_points)
    first = min((f for r in rows if (f := r.first_divergence) is not None), default=None)
    return PositionSeries(width, kl, dlogprob, first)


def within_tolerance(stats: ParityStats, profile: dict[str, float]) -> tuple[bool, list[str]]:
    """Pass/fail against a dtype tolerance profile, with the reasons for a failure."""
    reasons = []
    if stats.positions == 0:
        return False, ["no positions compared"]
    if stats.max_kl > profile["max_kl"]:
        reasons.append(f"max KL {stats.max_kl:.3g} > {profile['max_kl']:g}")
    if stats.mean_kl > profile["mean_kl"]:
        reasons.append(f"mean KL {stats.mean_kl:.3g} > {profile['mean_kl']:g}")
    if stats.max_abs_dlogprob > profile["max_abs_dlogprob"]:
        reasons.append(f"max |Δlogprob| {stats.max_abs_dlogprob:.3g} > {profile['max_abs_dlogprob']:g}")
    if stats.top1_agreement < profile["min_top1"]:
        reasons.append(f"top-1 agreement {stats.top1_agreement:.3f} < {profile['min_top1']:g}")
    return not reasons, reasons
