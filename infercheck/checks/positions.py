"""The position oracle's grading: prompt logprobs of every config variant against the HF reference's,
position by position, judged per position bucket (docs/design.md, "Oracles").

At each prompt position both sides list log-probabilities over the whole vocabulary's softmax (the
engine its top-k and the prompt token, the reference the same k and the prompt token); the error
at a position is the largest |engine − reference| over the tokens both list. A cell is a variant ×
bucket; it fails when its worst position exceeds the bucket's tolerance — the dtype profile's
`max_abs_dlogprob`, or the oracle's own floor for the bucket where that is larger (float32 rotary
angles lose precision with position: the floors are measured on the unmodified engine and given
in suites/oracles/positions.yaml). A NaN or +inf logprob, or a position one side lists and the
other does not, is an infinite error. The first failing position of each variant is reported, so
an error that starts at a boundary (a scaling cut-over, the sliding window's edge) is named by it.
A variant whose kernel-dispatch logprobs equal its forward_native twin's bit for bit on patched,
and did not on base, is WORKAROUND evidence: the fast path was routed to the fallback.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from infercheck.checks.app_compare import MAX_EXAMPLES, by_set
from infercheck.checks.parity import binned_max
from infercheck.payloads import Comparison, PositionSeries
from infercheck.position_grid import bucket_name, bucket_of, set_name
from infercheck.run.job import RequestResult

Row = list[list[float]] | None


@dataclass(frozen=True)
class PositionError:
    position: int
    error: float


def row_error(engine: Row, ref: Row) -> float | None:
    """Max |Δ| over the tokens both rows list; None where neither side scores the position."""
    if not engine and not ref:
        return None
    if not engine or not ref:
        return math.inf
    expected = {int(t): float(v) for t, v in ref}
    worst, common = 0.0, 0
    for tid, lp in engine:
        if math.isnan(lp) or lp == math.inf:
            return math.inf
        if int(tid) in expected:
            common += 1
            worst = max(worst, abs(float(lp) - expected[int(tid)]))
    return worst if common else math.inf


def position_errors(result: RequestResult, ref: RequestResult) -> list[PositionError]:
    """Every scored position of the prompt, in order (the reference scores the prompt alone, so one
    scoring serves every engine that served it; the generated token is not compared)."""
    n = len(result.prompt_ids)
    engine, expected = list(result.prompt_logprobs or [None] * n), list(ref.prompt_logprobs or [None] * n)
    if len(engine) != len(expected) or result.prompt_ids != ref.prompt_ids:
        return [PositionError(min(len(engine), len(expected)), math.inf)]
    return [PositionError(p, e) for p, (a, b) in enumerate(zip(engine, expected))
            if (e := row_error(a, b)) is not None]


@dataclass(frozen=True)
class BucketTolerance:
    base: float  # the dtype profile's max_abs_dlogprob
    floors: dict[int, float]  # bucket bound -> the oracle's measured floor

    def at(self, bound: int) -> float:
        return max(self.base, self.floors.get(bound, 0.0))


def tolerances(options: dict[str, Any], profile: dict[str, float]) -> BucketTolerance:
    """The oracle's per-bucket floors (its `tolerance:` option), never below the dtype profile's."""
    return BucketTolerance(float(profile["max_abs_dlogprob"]),
                           {int(b): float(v) for b, v in (options.get("tolerance") or {}).items()})


def compare_positions(results: list[RequestResult], refs: dict[str, RequestResult], bounds: tuple[int, ...],
                      tol: BucketTolerance) -> Comparison:
    """Each variant's positions, bucketed; cells `<variant>@≤<bound>` fail past their tolerance."""
    cells: dict[tuple[str, int], list[float]] = {}
    worst_at: dict[int, float] = {}  # prompt position -> the worst error over every variant
    first: dict[str, str] = {}
    failing: list[str] = []
    unscored: list[str] = []
    examples: list[dict[str, Any]] = []
    sets = by_set(results)
    served = [(v, r) for v, members in sets.items() for r in members.values()]
    for variant, result in sorted(served, key=lambda vr: (vr[0], vr[1].id)):
        ref = refs.get(result.id)
        if ref is None:
            unscored.append(variant)
            continue
        for pe in position_errors(result, ref):
            bound = bucket_of(pe.position, bounds)
            if bound is None:
                continue
            errs = cells.setdefault((variant, bound), [])
            errs.append(pe.error)
            worst_at[pe.position] = max(worst_at.get(pe.position, 0.0), pe.error)
            if pe.error > tol.at(bound) and variant not in first:
                first[variant] = f"position {pe.position} ({bucket_name(bound)}): |Δlogprob| {pe.error:.3g}"
                examples.append({"request": result.id, "variant": variant, "position": pe.position,
                                 "bucket": bucket_name(bound), "abs_dlogprob": pe.error})
    rows = []
    for (variant, bound), errs in cells.items():
        worst, limit = max(errs), tol.at(bound)
        rows.append({"variant": variant, "bucket": bucket_name(bound), "positions": len(errs),
                     "max_abs_dlogprob": worst, "tolerance": limit, "passed": worst <= limit})
        if worst > limit:
            failing.append(f"{variant}@{bucket_name(bound)}")
    failing += [f"{v}@unscored" for v in unscored]
    variants = sorted({r["variant"] for r in rows})
    summary = (f"{len(variants)} variants, {sum(r['positions'] for r in rows)} positions in {len(rows)} "
               f"variant×bucket cells: {len(failing)} past tolerance"
               + (f" ({', '.join(failing[:MAX_EXAMPLES])})" if failing else ""))
    detail = {"failing_cells": failing, "first_failure": first,
              "tolerance": {bucket_name(b): tol.at(b) for b in bounds},
              "positions": sum(r["positions"] for r in rows), "cells": rows,
              "same_as_native": same_as_native(sets),
              "per_position": asdict(prompt_series(worst_at, [e["position"] for e in examples]))}
    worst_all = max((r["max_abs_dlogprob"] for r in rows), default=math.inf)
    return Comparison("positions", bool(rows) and not failing, worst_all, summary, detail, examples[:MAX_EXAMPLES])


def prompt_series(worst_at: dict[int, float], failing: list[int]) -> PositionSeries:
    """Per prompt position, the worst |Δlogprob| over every variant (0 at a position inside the
    range that none scored), binned; marked at the earliest failing position (`failing`: each
    variant's first)."""
    if not worst_at:
        return PositionSeries()
    start = min(worst_at)
    width, values = binned_max([worst_at.get(p, 0.0) for p in range(start, max(worst_at) + 1)])
    return PositionSeries(width, [], values, min(failing, default=None), start)


def same_as_native(sets: dict[str, dict[str, RequestResult]]) -> list[str]:
    """Variants (sets: `by_set` of the results) whose prompt logprobs under vLLM's own kernels
    equal, bit for bit at every position, their logprobs under forward_native: the two
    implementations round differently, so exact equality says the kernels did not run."""
    out = []
    for name, members in sorted(sets.items()):
        twin = sets.get(set_name(name, "native")) if "~" not in name else None
        if twin and members and all(twin.get(k) is not None and twin[k].prompt_logprobs == r.prompt_logprobs
                                    for k, r in members.items()):
            out.append(name)
    return out


def bypassed_kernel_sign(base: Comparison | None, patched: Comparison | None) -> str | None:
    """Workaround evidence: variants whose kernel dispatch computes exactly what forward_native
    does on patched, where it did not on base (the patch routes the fast path to the fallback)."""
    if base is None or patched is None:
        return None
    new = sorted(set(patched.detail.get("same_as_native") or ()) - set(base.detail.get("same_as_native") or ()))
    if not new:
        return None
    return (f"vLLM's own kernels no longer run for {len(new)} position variant(s): their logprobs equal the "
            f"forward_native dispatch's bit for bit on patched, not on base ({', '.join(new[:MAX_EXAMPLES])})")
