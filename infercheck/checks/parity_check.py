"""Parity suites (and parity symptoms) as CheckResults: base and patched, each vs the reference."""

from __future__ import annotations

from infercheck.checks.noise_floor import Tolerance
from infercheck.checks.parity import RequestParity, parity_stats, position_series, teacher_forced, within_tolerance
from infercheck.names import ENGINE_VARIANTS, CheckFlag, CheckKind, Variant
from infercheck.payloads import ParityDetail, ParityPayload, ReferenceDetail
from infercheck.records import CheckResult, Observation
from infercheck.run.job import RequestResult

MAX_EXAMPLES = 3


def criterion_text(profile: dict[str, float], floored: bool = False) -> str:
    source = " (thresholds from the measured noise floor: see Tolerances)" if floored else ""
    return (f"teacher-forced vs reference: max KL <= {profile['max_kl']:.3g}, mean KL <= {profile['mean_kl']:.3g}, "
            f"max |Δlogprob| <= {profile['max_abs_dlogprob']:.3g}, top-1 agreement >= {profile['min_top1']:g} "
            f"(near ties within {profile['near_tie']:g} nats allowed){source}")


def observe(variant: Variant, rows: list[RequestParity], profile: dict[str, float]) -> Observation:
    stats = parity_stats(rows)
    ok, reasons = within_tolerance(stats, profile)
    detail = ParityDetail(stats.positions, stats.mean_kl, stats.p99_kl, stats.top1_agreement, stats.near_ties,
                          stats.max_abs_dlogprob, stats.first_divergence, len(stats.diverged_requests), reasons,
                          position_series(rows))
    return Observation(variant, stats.max_kl, ok, None, stats.positions, detail)


def divergence_examples(variant: str, rows: list[RequestParity], results: dict[str, RequestResult],
                        references: dict[str, RequestResult], prompts: dict[str, str]) -> list[dict]:
    examples = []
    for row in rows:
        pos = row.first_divergence
        if pos is None:
            continue
        result, ref = results[row.id], references[row.id]
        pieces = {**ref.pieces, **result.pieces}
        text = lambda ids: "".join(pieces.get(str(t), f"<{t}>") for t in ids)  # noqa: E731
        position = row.positions[pos]
        examples.append({
            "variant": variant, "request": row.id, "position": pos,
            "context": (prompts.get(row.id, "") + text(result.output_ids[:pos]))[-60:],
            "engine_token": text([result.output_ids[pos]]), "reference_token": text([position.ref_best]),
            "reference_gap_nats": round(position.ref_gap, 4), "kl": position.kl,
            "engine_text": text(result.output_ids),
        })
        if len(examples) >= MAX_EXAMPLES:
            break
    return examples


def parity_check(name: str, kind: CheckKind, engine: dict[str, list[RequestResult]],
                 references: dict[str, dict[str, RequestResult]], tolerance: Tolerance, affected: bool,
                 prompts: dict[str, str], why: str = "") -> CheckResult:
    """engine: variant -> results; references: variant -> {engine request id: reference scoring};
    judged against `tolerance.profile` (checks/noise_floor.py: the table's, or from a measured floor)."""
    profile = tolerance.profile
    observations, examples = {}, []
    for variant in ENGINE_VARIANTS:
        rows = teacher_forced(engine[variant], references[variant], profile["near_tie"])
        observations[variant] = observe(variant, rows, profile)
        by_id = {r.id: r for r in engine[variant]}
        examples += divergence_examples(variant, rows, by_id, references[variant], prompts)
    base, patched = observations[Variant.BASE], observations[Variant.PATCHED]
    flags = []
    if base.passed and not patched.passed:
        flags.append(CheckFlag.REGRESSED)
    if not patched.passed:
        flags.append(CheckFlag.NOT_RESTORED)
    reference = Observation(Variant.REFERENCE, 0.0, True, None, patched.n,
                            ReferenceDetail("HF transformers float32, ground truth"))
    payload = ParityPayload(dict(profile), dict(tolerance.table), dict(tolerance.floor), tolerance.note)
    return CheckResult(name, kind, "max_kl", criterion_text(profile, bool(tolerance.floor)), affected, base, patched,
                       reference, flags, payload, examples, why)
