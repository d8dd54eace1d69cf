"""The report's figures: what each check stored, as plot data for report/plots.py, each plot with
its caption (docs/design.md, "Report"). Pure: no I/O. A check that stored nothing to plot (a run
recorded before the series were kept, a variant that errored) gets no figure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infercheck.checks.app_compare import MAX_BARS
from infercheck.checks.parity import MAX_POINTS
from infercheck.names import APP_LIKE, Variant
from infercheck.payloads import AccuracyPayload, ParityDetail, ParityPayload, PositionSeries, SampleHistogram
from infercheck.records import CheckResult, from_data
from infercheck.report import plots
from infercheck.report.labels import metric_name
from infercheck.report.view import app_detail, app_runtime

ENGINES = (Variant.BASE, Variant.PATCHED)
PARITY_TOLERANCES = ("max_kl", "max_abs_dlogprob")


@dataclass(frozen=True)
class FigureView:
    svg: str  # an <svg> element (matplotlib escapes the text it draws)
    caption: str


def figure(svg: str | None, caption: str) -> FigureView | None:
    return None if svg is None else FigureView(svg, caption)


def binning(series: dict[str, PositionSeries]) -> str:
    """The caption's notes on the axes: binned series, zeros on a log axis."""
    width = max((s.bin_width for s in series.values()), default=1)
    binned = f" Each point is the worst of {width} consecutive positions (at most {MAX_POINTS} points)."
    return (binned if width > 1 else "") + " On a log axis an error of 0 sits at its bottom."


# ---- parity suites (and parity symptoms) ----------------------------------------------------------

def parity_figure(check: CheckResult) -> FigureView | None:
    series = {v.value: obs.detail.per_position for v in ENGINES
              if isinstance((obs := check.observation(v)).detail, ParityDetail) and obs.detail.per_position}
    profile = check.payload.profile if isinstance(check.payload, ParityPayload) else {}
    tolerance = {key: profile[key] for key in PARITY_TOLERANCES if key in profile}
    svg = plots.position_svg(plots.PositionPlot(check.name, "output position", series, tolerance))
    return figure(svg, "Per output position, the worst KL(reference ‖ engine) and |Δlogprob| of the chosen token "
                  "over the suite's requests: base and patched, teacher-forced against the HF reference. Dashed: the "
                  "dtype's tolerance; dotted: the first real divergence (a top-1 flip beyond the near-tie margin)."
                  + binning(series))


# ---- accuracy suites --------------------------------------------------------------------------------

def accuracy_figure(check: CheckResult) -> FigureView | None:
    if not isinstance(check.payload, AccuracyPayload):
        return None
    points = [plots.AccuracyPoint(v.value, obs.value, obs.ci) for v in Variant
              if (obs := check.observation(v)) is not None and obs.value is not None]
    reference = check.reference.value if check.reference is not None else None
    tolerance = check.payload.tolerance
    metric = metric_name(str(check.metric))
    svg = plots.accuracy_svg(plots.AccuracyPlot(check.name, metric, points, tolerance, reference))
    return figure(svg, f"Each variant's {metric} on the {check.payload.paired_samples} samples all three "
                  f"answered, with its 95% Wilson interval; grey: the reference's accuracy ± the tolerance "
                  f"({tolerance:g}).")


# ---- apps and oracles -------------------------------------------------------------------------------

def comparator_details(check: CheckResult, comparator: str, key: str) -> dict[str, Any]:
    """variant -> the value its comparison of `comparator` stored under `key`, where it did."""
    out = {}
    for variant in ENGINES:
        found = app_detail(check.observation(variant)).comparison(comparator)
        if found is not None and found.detail.get(key):
            out[variant.value] = found.detail[key]
    return out


def stored_series(check: CheckResult, comparator: str) -> dict[str, PositionSeries]:
    stored = comparator_details(check, comparator, "per_position")
    return {variant: from_data(PositionSeries, data) for variant, data in stored.items()}


def reference_figure(check: CheckResult) -> FigureView | None:
    series = stored_series(check, "reference")
    svg = plots.position_svg(plots.PositionPlot(f"{check.name}: against the reference", "output position", series, {}))
    return figure(svg, "Per output position of the app's greedy outputs, the worst KL(reference ‖ engine) and "
                  "|Δlogprob| of the chosen token: base and patched, teacher-forced against the HF reference. "
                  "Dotted: the first real divergence." + binning(series))


def positions_figure(check: CheckResult) -> FigureView | None:
    series = stored_series(check, "positions")
    per_bucket = {float(t) for d in comparator_details(check, "positions", "tolerance").values() for t in d.values()}
    tolerance = {"max_abs_dlogprob": per_bucket.pop()} if len(per_bucket) == 1 else {}  # a line when the buckets agree
    svg = plots.position_svg(plots.PositionPlot(f"{check.name}: prompt logprobs", "prompt position", series, tolerance,
                                                "first past tolerance"))
    return figure(svg, "Per prompt position, the worst |Δlogprob| of the prompt logprobs over every config "
                  "variant: base and patched against the HF reference. Dotted: the first position past its "
                  "bucket's tolerance." + binning(series))


def histogram_panels(per_variant: dict[str, list[SampleHistogram]]) -> list[plots.HistogramPanel]:
    """One panel per sampled distribution (by label), the variants' bins merged in first-seen order;
    a bin a variant does not list it sampled none of (both variants' bins come from the same
    reference distribution)."""
    labels = list(dict.fromkeys(h.label for hs in per_variant.values() for h in hs))
    panels = []
    for label in labels:
        found = {v: h for v, hs in per_variant.items() for h in hs if h.label == label}
        expected = {b: e for h in reversed(found.values()) for b, e in zip(h.bins, h.expected)}
        bins = list(dict.fromkeys(b for h in found.values() for b in h.bins))
        observed = {v: [dict(zip(h.bins, h.observed)).get(b, 0) for b in bins] for v, h in found.items()}
        panels.append(plots.HistogramPanel(label, bins, [expected[b] for b in bins], observed))
    return panels


def stored_histograms(check: CheckResult, comparator: str, key: str) -> dict[str, list[SampleHistogram]]:
    """variant -> the histograms a comparator stored under `key` (one, or a list of them)."""
    out = {}
    for variant, data in comparator_details(check, comparator, key).items():
        out[variant] = [from_data(SampleHistogram, d) for d in (data if isinstance(data, list) else [data])]
    return out


def histogram_figure(check: CheckResult, comparator: str, key: str, caption: str) -> FigureView | None:
    histograms = stored_histograms(check, comparator, key)
    if not histograms:
        return None
    axis = next(iter(histograms.values()))[0].axis
    return figure(plots.histogram_svg(plots.HistogramPlot(f"{check.name}: {comparator}", axis,
                                                          histogram_panels(histograms))), caption)


def app_figures(check: CheckResult) -> list[FigureView | None]:
    return [
        reference_figure(check),
        positions_figure(check),
        histogram_figure(check, "sampler", "histograms",
                         f"Per sampling combination, the first tokens sampled (markers) over the counts the "
                         f"reference distribution implies for its parameters (grey): its {MAX_BARS} likeliest "
                         f"tokens, then any it rules out, the rest pooled as \"other\"."),
        histogram_figure(check, "samples", "pit_histogram",
                         "The probability integral transform of every sampled token under its processed reference "
                         "distribution, in ten bins (markers): a sampler true to the reference fills them evenly "
                         "(grey)."),
    ]


# ---- the page -------------------------------------------------------------------------------------

def figures_of(check: CheckResult) -> list[FigureView]:
    found = app_figures(check) if check.kind in APP_LIKE else [parity_figure(check), accuracy_figure(check)]
    return [f for f in found if f is not None]


def not_drawn(what: str, exc: Exception) -> FigureView:
    """A figure that failed to draw: its caption says so (the report and the verdict stand; the
    tables above it hold the numbers)."""
    message = " ".join(str(exc).split())[:300]
    return FigureView("", f"{what}: figure not drawn ({type(exc).__name__}: {message}) — the numbers are in the "
                          "table; this is a bug of infercheck's report, please report it.")


def check_figures(checks: list[CheckResult]) -> dict[int, list[FigureView]]:
    """Index of each check in `checks` (a run's) -> its figures, for checks that have any. A check
    whose figures fail to draw gets a caption saying so instead of failing the report."""
    out = {}
    for index, check in enumerate(checks):
        try:
            found = figures_of(check)
        except Exception as exc:  # noqa: BLE001 — a plotting bug must not lose the verdict
            found = [not_drawn(check.name, exc)]
        if found:
            out[index] = found
    return out


def runtime_figure(checks: list[CheckResult]) -> FigureView | None:
    """The runtime figure, or a caption saying it could not be drawn."""
    try:
        return draw_runtime(checks)
    except Exception as exc:  # noqa: BLE001 — see check_figures
        return not_drawn("runtime", exc)


def draw_runtime(checks: list[CheckResult]) -> FigureView | None:
    """Prefix-cache hit rate and tokens/s of every app that recorded them, base beside patched."""
    records = {c.name: {v.value: app_runtime(c, v) for v in ENGINES} for c in checks if c.kind in APP_LIKE}
    recorded = [name for name, per in records.items()
                if any(r.hit_rate is not None or r.tokens_per_s is not None for r in per.values())]
    metrics = [plots.RuntimeMetric(label, {v.value: [getattr(records[n][v.value], key) for n in recorded]
                                           for v in ENGINES}, percent=key == "hit_rate")
               for key, label in (("hit_rate", "prefix-cache hit rate [%]"), ("tokens_per_s", "tokens/s"))]
    svg = plots.runtime_svg(plots.RuntimePlot(recorded, metrics))
    return figure(svg, "Each app's prefix-cache hit rate (hits over queries) and throughput (prompt and output "
                  "tokens over the engine's time), base beside patched; the table above gives the numbers.")
