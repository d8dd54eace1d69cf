"""Greedy parity of an engine against the reference, per request, over plain results."""

from __future__ import annotations

from dataclasses import dataclass

from infercheck.run.job import RequestResult


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


def compare_sequence(engine: RequestResult, reference: RequestResult) -> SequenceParity:
    a, b = engine.output_ids, reference.output_ids
    common = 0
    while common < min(len(a), len(b)) and a[common] == b[common]:
        common += 1
    diverged = None if (common == len(a) == len(b)) else common
    deltas = [abs(x - y) for x, y in zip((engine.chosen_logprobs or [])[:common],
                                         (reference.chosen_logprobs or [])[:common])]
    return SequenceParity(engine.id, diverged is None, diverged, max(deltas, default=0.0), common)


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
        max_abs_dlogprob=max((r.max_abs_dlogprob for r in rows), default=0.0),
        first_divergences={r.id: r.first_divergence for r in rows if r.first_divergence is not None},
    )
