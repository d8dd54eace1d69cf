"""The report's plots (infercheck/report/plots.py, figures.py), the series they draw (stored by the
checks), the labelled numbers of the page's tables, and the page of a recorded run: inline SVG,
deterministic, one per parity check with a series, under 1 MB."""

from __future__ import annotations

import json
import math
import random
import re
import tarfile
import xml.etree.ElementTree as ET
from dataclasses import asdict
from pathlib import Path

import pytest

from infercheck.checks.app_compare import MAX_BARS, token_histogram
from infercheck.checks.parity import PositionParity, RequestParity, binned_max, position_series
from infercheck.checks.positions import prompt_series
from infercheck.checks.sampling_oracle import PIT_BINS, pit_histogram
from infercheck.names import CheckKind, Variant
from infercheck.payloads import (AppDetail, AppPayload, Comparison, ParityDetail, ParityPayload, PositionSeries,
                                 RuntimeRecord, SampleHistogram)
from infercheck.records import CheckResult, Observation, ValidationRun
from infercheck.report import figures, labels, plots
from infercheck.report.html import render_report

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"
FIXTURE = Path(__file__).resolve().parents[1] / "data" / "report" / "symptom_only.json"
MEGABYTE = 1_000_000


def parsed(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == "svg"
    return root


def ids(svg: str) -> list[str]:
    return [e.get("id") for e in parsed(svg).iter() if e.get("id")]


def ending(svg: str, suffix: str) -> list[str]:
    """Ids of the drawing's groups named `suffix` (each SVG prefixes its ids with its own hash)."""
    return [i for i in ids(svg) if re.fullmatch(r"f[0-9a-f]{10}-" + re.escape(suffix), i)]


def texts(svg: str) -> list[str]:
    return ["".join(e.itertext()) for e in parsed(svg).iter("text")]


def noisy(n: int, scale: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [float(f"{scale * rng.random():.3g}") for _ in range(n)]


def series(n: int = 12, first: int | None = None, seed: int = 0, scale: float = 1e-6) -> PositionSeries:
    return PositionSeries(1, noisy(n, scale, seed), noisy(n, 100 * scale, seed + 1), first)


# ---- the stored series --------------------------------------------------------------------------

def position(kl: float, dlogprob: float, agree: bool = True) -> PositionParity:
    return PositionParity(kl, dlogprob, agree, False, 0, 0.0 if agree else 5.0)


def test_binned_max_keeps_every_value_up_to_the_cap_and_the_worst_of_equal_bins_past_it():
    assert binned_max([1.0, 3.0, 2.0], 3) == (1, [1.0, 3.0, 2.0])
    assert binned_max([1.0, 3.0, 2.0, 5.0, 4.0, 0.5, 7.0], 3) == (3, [3.0, 5.0, 7.0])  # bins of 3, the last of 1
    assert binned_max([0.1234567, math.nan], 1) == (2, [float("inf")])  # NaN counts as the worst; 3 digits kept
    assert binned_max([0.1234567], 4) == (1, [0.123])
    assert binned_max([], 4) == (1, [])


def test_position_series_is_the_worst_request_at_each_position():
    rows = [RequestParity("a", [position(1e-6, 0.01), position(2e-6, 0.5, agree=False), position(0.0, 0.0)]),
            RequestParity("b", [position(3e-6, 0.02), position(1e-7, 0.03)]),
            RequestParity("c", [position(0.0, 0.0), position(0.0, 0.0), position(4e-6, 0.04), position(math.nan, 0.1)])]
    s = position_series(rows)
    assert (s.bin_width, s.max_kl, s.max_abs_dlogprob) == (1, [3e-6, 2e-6, 4e-6, math.inf], [0.02, 0.5, 0.04, 0.1])
    assert s.first_divergence == 1 and s.positions() == [0, 1, 2, 3]
    binned = position_series(rows, max_points=2)  # 4 positions into 2 bins of 2
    assert (binned.bin_width, binned.max_kl, binned.max_abs_dlogprob) == (2, [3e-6, math.inf], [0.5, 0.1])
    assert binned.positions() == [0, 2] and position_series([]) == PositionSeries()


def test_the_position_oracle_series_starts_at_the_first_scored_prompt_position():
    s = prompt_series({1: 0.002, 2: 0.5, 4: 0.001}, failing=[4, 2])
    assert (s.start, s.max_kl, s.max_abs_dlogprob, s.first_divergence) == (1, [], [0.002, 0.5, 0.0, 0.001], 2)
    assert s.positions() == [1, 2, 3, 4] and prompt_series({}, []) == PositionSeries()


def test_a_parity_detail_from_before_the_series_loads_without_one():
    from infercheck.records import from_data

    detail = from_data(ParityDetail, {"positions": 4, "mean_kl": 0.0, "p99_kl": 0.0, "top1_agreement": 1.0,
                                      "near_ties": 0, "max_abs_dlogprob": 0.0, "first_divergence": None,
                                      "diverged_requests": 0})
    assert detail.per_position is None and detail.failed_on == []


def test_the_sampler_histogram_shows_the_likeliest_tokens_the_impossible_ones_and_pools_the_rest():
    probs = {t: (20 - t) / 210 for t in range(20)}  # 20 tokens, likeliest first
    probs[99] = 0.0
    counts = {0: 30, 1: 20, 19: 1, 99: 2}  # 99: a token the parameters rule out
    h = token_histogram("temperature=1.0", counts, probs)
    assert h.bins == [str(t) for t in range(MAX_BARS)] + ["99", "other"]
    assert h.observed[:2] == [30, 20] and h.observed[-2:] == [2, 1] and sum(h.observed) == sum(counts.values())
    assert h.expected[-2] == 0.0 and sum(h.expected) == pytest.approx(sum(counts.values()), abs=0.05)


def test_the_pit_histogram_is_uniform_bins_beside_their_expected_counts():
    h = pit_histogram([0.0, 0.05, 0.55, 0.999, 1.0])
    assert len(h.bins) == PIT_BINS and h.bins[0] == "0.0–0.1"
    assert h.observed == [2, 0, 0, 0, 0, 1, 0, 0, 0, 2] and h.expected == [0.5] * PIT_BINS


# ---- the plots ------------------------------------------------------------------------------------

def position_plot(**series_by_variant: PositionSeries) -> plots.PositionPlot:
    return plots.PositionPlot("parity/addition-long", "output position", series_by_variant,
                              {"max_kl": 1e-3, "max_abs_dlogprob": 1e-3})


def test_position_plot_draws_each_variant_per_metric_with_tolerance_and_first_divergence():
    svg = plots.position_svg(position_plot(base=series(), patched=series(first=5, seed=3)))
    for variant in ("base", "patched"):
        assert len(ending(svg, f"{variant}-max_kl")) == 1 and len(ending(svg, f"{variant}-max_abs_dlogprob")) == 1
    assert len(ending(svg, "tolerance-max_kl")) == 1 and len(ending(svg, "tolerance-max_abs_dlogprob")) == 1
    assert ending(svg, "patched-max_kl-first-divergence") and not ending(svg, "base-max_kl-first-divergence")
    words = texts(svg)
    assert {"base", "patched", "tolerance", "first divergence (patched): 5", "output position"} <= set(words)
    assert "max KL [nats]" in words and "max |Δlogprob| [nats]" in words
    assert not svg.startswith("<?xml") and "http" not in svg


def test_position_plot_marks_infinite_values_and_draws_only_measured_metrics():
    prompt = PositionSeries(16, [], [0.001, math.inf, 0.002], 16, start=1)
    svg = plots.position_svg(position_plot(patched=prompt))
    assert ending(svg, "patched-max_abs_dlogprob") and ending(svg, "patched-max_abs_dlogprob-infinite")
    assert not ending(svg, "patched-max_kl") and "max KL [nats]" not in texts(svg)


def test_plots_are_deterministic_and_their_ids_never_clash_on_one_page():
    plot = position_plot(base=series(), patched=series(first=2, seed=3))
    first, again = plots.position_svg(plot), plots.position_svg(plot)
    assert first == again
    other = plots.position_svg(position_plot(base=series(seed=9)))
    assert not set(ids(first)) & set(ids(other))


def test_nothing_to_plot_gives_none():
    assert plots.position_svg(position_plot()) is None
    assert plots.position_svg(position_plot(base=PositionSeries())) is None
    assert plots.histogram_svg(plots.HistogramPlot("t", "x", [])) is None
    assert plots.histogram_svg(plots.HistogramPlot("t", "x", [plots.HistogramPanel("p", [], [], {})])) is None
    assert plots.accuracy_svg(plots.AccuracyPlot("t", "acc", [], 0.05, None)) is None
    assert plots.runtime_svg(plots.RuntimePlot([], [])) is None
    assert plots.runtime_svg(plots.RuntimePlot(["app/a"], [plots.RuntimeMetric("tokens/s", {"base": [None]})])) is None


def test_histogram_plot_has_a_panel_per_distribution_and_a_marker_series_per_variant():
    panels = [plots.HistogramPanel(f"top_k={k}", ["4", "5", "other"], [30.0, 20.0, 10.0],
                                   {"base": [29, 21, 10], "patched": [40, 20, 0]}) for k in (2, 3, 4)]
    svg = plots.histogram_svg(plots.HistogramPlot("app/sampler-distribution: sampler", "sampled token id", panels))
    for n in range(3):
        assert ending(svg, f"reference-expected-{n}") and ending(svg, f"base-sampled-{n}")
        assert ending(svg, f"patched-sampled-{n}")
    words = {"top_k=2", "top_k=4", "reference expects", "base sampled", "patched sampled", "sampled token id"}
    assert words <= set(texts(svg))


def test_accuracy_plot_draws_each_variant_with_its_interval_beside_the_tolerance_band():
    points = [plots.AccuracyPoint("base", 0.1, (0.05, 0.17)), plots.AccuracyPoint("patched", 0.93, (0.88, 0.96)),
              plots.AccuracyPoint("reference", 0.95, (0.9, 0.98))]
    svg = plots.accuracy_svg(plots.AccuracyPlot("accuracy/addition-many-shot", "exact_match", points, 0.05, 0.95))
    assert all(ending(svg, f"{v}-accuracy") for v in ("base", "patched", "reference"))
    assert ending(svg, "tolerance-band") and "reference ± tolerance 0.05" in texts(svg)
    assert "exact_match (fraction of samples, 95% interval)" in texts(svg)


def test_an_accuracy_outside_its_interval_still_plots():
    """The interval is over the paired samples, the value over every sample the variant answered."""
    points = [plots.AccuracyPoint("base", 0.5, (0.55, 0.7)), plots.AccuracyPoint("patched", 0.9, (0.7, 0.85))]
    svg = plots.accuracy_svg(plots.AccuracyPlot("accuracy/x", "exact_match", points, 0.05, 0.6))
    assert ending(svg, "base-accuracy") and ending(svg, "patched-accuracy")


def test_runtime_plot_has_a_bar_per_app_and_variant_and_skips_an_unrecorded_metric():
    apps = ["app/a", "app/b", "app/c"]
    metrics = [plots.RuntimeMetric("prefix-cache hit rate [%]", {"base": [0.8, None, 0.5], "patched": [0.1, None, 0.5]},
                                   percent=True),
               plots.RuntimeMetric("tokens/s", {"base": [400.0, 300.0, 200.0], "patched": [380.0, 310.0, None]}),
               plots.RuntimeMetric("preemptions", {"base": [None] * 3, "patched": [None] * 3})]
    svg = plots.runtime_svg(plots.RuntimePlot(apps, metrics))
    for variant in ("base", "patched"):
        assert len([i for i in ids(svg) if re.search(f"-{variant}-metric1-app\\d$", i)]) == 3
    assert not [i for i in ids(svg) if "-metric2-" in i]
    assert {"app/a", "app/c", "tokens/s", "prefix-cache hit rate [%]", "80%", "400"} <= set(texts(svg))


# ---- figures from checks ------------------------------------------------------------------------------

def parity_result(name: str = "parity/addition-long", length: int = 12) -> CheckResult:
    def obs(variant: Variant, first: int | None, seed: int) -> Observation:
        s = series(length, first, seed)
        return Observation(variant, max(s.max_kl), True, None, length,
                           ParityDetail(length, 1e-7, 1e-6, 1.0, 0, max(s.max_abs_dlogprob), first, 0, [], s))
    return CheckResult(name, CheckKind.PARITY, "max_kl", "teacher-forced", True, obs(Variant.BASE, None, 0),
                       obs(Variant.PATCHED, 3, 5), Observation(Variant.REFERENCE, 0.0, True, None, length),
                       [], ParityPayload({"max_kl": 1e-3, "mean_kl": 1e-4, "max_abs_dlogprob": 1e-3, "near_tie": 0.01}))


def app_result(name: str, kind: CheckKind, per_variant: dict[str, list[Comparison]],
               runtime: dict[str, RuntimeRecord] | None = None) -> CheckResult:
    def obs(variant: str) -> Observation:
        comparisons = per_variant[variant]
        failed = [c.comparator for c in comparisons if not c.passed]
        return Observation(variant, float(len(failed)), not failed, None, 8,
                           AppDetail(comparisons, (runtime or {}).get(variant, RuntimeRecord()), failed))
    return CheckResult(name, kind, "failed comparators", "comparators", False, obs("base"), obs("patched"), None,
                       [], AppPayload(runtime or {}))


def reference_comparison(s: PositionSeries) -> Comparison:
    return Comparison("reference", True, 1e-7, "8 outputs", {"max_kl": 1e-7, "per_position": asdict(s)})


def sampler_comparison(extra_token: bool) -> Comparison:
    probs = {4: 0.5, 5: 0.3, 6: 0.2, 7: 0.0}
    counts = {4: 290, 5: 190, 6: 120} | ({7: 3} if extra_token else {})
    histograms = [asdict(token_histogram(label, counts, probs)) for label in ("temperature=1.0", "top_k=2")]
    return Comparison("sampler", not extra_token, 0.5, "2/2", {"combinations": [], "histograms": histograms})


def demo_like_checks() -> list[CheckResult]:
    """What the demo's run holds at most: parity suites and apps with series at the cap, the
    position oracle's prompt positions binned, sampler and PIT histograms."""
    long = PositionSeries(16, [], noisy(512, 1e-3, 7), 300, start=1)
    pit = {v: Comparison("samples", True, 0.4, "480 sampled tokens",
                         {"pit_histogram": asdict(pit_histogram(noisy(480, 1.0, seed)))})
           for seed, v in enumerate(("base", "patched"))}
    return [
        parity_result("parity/addition-short", 8), parity_result("parity/addition-long", 512),
        *[app_result(f"app/reference-{i}", CheckKind.APP,
                     {v: [reference_comparison(series(64, None, i + len(v)))] for v in ("base", "patched")},
                     {"base": RuntimeRecord(812.0, 0.5), "patched": RuntimeRecord(790.0, 0.48)}) for i in range(4)],
        app_result("oracle/positions", CheckKind.ORACLE,
                   {v: [Comparison("positions", True, 1e-3, "cells", {"tolerance": {"≤256": 0.01, "≤8192": 0.01},
                                                                      "per_position": asdict(long)})]
                    for v in ("base", "patched")}),
        app_result("oracle/sampling", CheckKind.ORACLE, {"base": [pit["base"]], "patched": [pit["patched"]]}),
        app_result("app/sampler-distribution", CheckKind.APP,
                   {"base": [sampler_comparison(False)], "patched": [sampler_comparison(True)]}),
    ]


def test_every_check_with_stored_plot_data_gets_its_figure():
    checks = demo_like_checks()
    found = figures.check_figures(checks)
    assert sorted(found) == list(range(len(checks)))
    assert all(len(f) == 1 and f[0].caption and parsed(f[0].svg) is not None for f in found.values())
    positions = found[6][0]
    assert "prompt position" in texts(positions.svg) and "worst of 16 consecutive positions" in positions.caption
    assert {"tolerance 0.01", "first past tolerance (patched): 300"} <= set(texts(positions.svg))
    runtime = figures.runtime_figure(checks)
    assert runtime is not None and {f"app/reference-{i}" for i in range(4)} <= set(texts(runtime.svg))


def test_sampler_panels_merge_the_variants_bins():
    base = SampleHistogram("t", "token", ["4", "5", "other"], [5, 3, 1], [5.0, 3.0, 1.0])
    patched = SampleHistogram("t", "token", ["4", "5", "7", "other"], [5, 2, 1, 1], [5.0, 3.0, 0.0, 1.0])
    [panel] = figures.histogram_panels({"base": [base], "patched": [patched]})
    assert panel.bins == ["4", "5", "other", "7"] and panel.expected == [5.0, 3.0, 1.0, 0.0]
    assert panel.observed == {"base": [5, 3, 1, 0], "patched": [5, 2, 1, 1]}


def test_a_demo_like_page_holds_every_figure_and_stays_under_a_megabyte():
    run = ValidationRun.from_dict(json.loads(FIXTURE.read_text()))
    run.checks += demo_like_checks()
    html = render_report(run)
    extra = 3  # the fixture's two accuracy checks and the runtime figure (its parity check predates the series)
    assert html.count("<figure>") == html.count("<figcaption>") == len(demo_like_checks()) + extra
    assert len(html.encode()) < MEGABYTE
    for svg in re.findall(r"<svg.*?</svg>", html, re.S):
        parsed(svg)
    all_ids = re.findall(r'\bid="([^"]+)"', html)
    assert len(all_ids) == len(set(all_ids))


# ---- labelled numbers -------------------------------------------------------------------------------

def test_table_numbers_say_what_they_are():
    parity = parity_result()
    parity.patched.value = 2.9e-6
    assert labels.measured(parity, Variant.PATCHED) == "max KL 2.9e-6"
    assert labels.counted(parity, parity.patched) == "12 positions"
    app = app_result("app/x", CheckKind.APP, {"base": [sampler_comparison(False), reference_comparison(series())],
                                              "patched": [sampler_comparison(True), reference_comparison(series())]})
    assert labels.measured(app, Variant.PATCHED) == "comparators failing: 1 of 2"
    accuracy = CheckResult("accuracy/a", CheckKind.ACCURACY, "exact_match", "c", True,
                           Observation(Variant.BASE, 0.93, True, (0.88, 0.96), 200),
                           Observation(Variant.PATCHED, None, None, None, None, error="crashed"))
    assert labels.measured(accuracy, Variant.BASE) == "exact match 0.93 [0.88, 0.96]"
    assert labels.measured(accuracy, Variant.BASE, interval=False) == "exact match 0.93"
    assert labels.measured(accuracy, Variant.PATCHED) == labels.measured(accuracy, Variant.REFERENCE) == "—"
    assert labels.counted(accuracy, accuracy.base) == "200 samples"
    assert labels.number(812.4) == "812" and labels.number(1.5e12) == "1.5e12" and labels.number(math.inf) == "inf"


# ---- a recorded run's page --------------------------------------------------------------------------------

def section_of(html: str, index: int) -> str:
    start = html.index(f'<section id="check-{index}"')
    return html[start:html.index("</section>", start)]


@pytest.mark.parametrize("name", ["root-fix-with-finite-logprobs"])
def test_the_recorded_run_page_plots_every_parity_check_and_stays_small(name, tmp_path, monkeypatch):
    """The recorded results.json predates the series: its page has no parity plot; regrade
    recomputes the checks from the stored worker rows, and the series appear."""
    from infercheck.pipeline import regrade

    monkeypatch.setenv("INFERCHECK_REPORTS", str(tmp_path / "reports"))
    with tarfile.open(RUNS / f"{name}.tar.xz") as tar:
        tar.extractall(tmp_path, filter="data")
    folder = tmp_path / name
    before = ValidationRun.from_dict(json.loads((folder / "results.json").read_text()))
    assert "<svg" not in "".join(section_of(render_report(before), i) for i, c in enumerate(before.checks)
                                 if c.kind == CheckKind.PARITY)
    run, _ = regrade(folder)
    html = (folder / "index.html").read_text()
    parity = [i for i, c in enumerate(run.checks) if isinstance(c.patched.detail, ParityDetail)
              and c.patched.detail.per_position and c.patched.detail.per_position.max_kl]
    assert parity
    for index in parity:
        svg = re.search(r"<svg.*?</svg>", section_of(html, index), re.S)
        assert svg and "max KL [nats]" in texts(svg.group(0))
    assert len(html.encode()) < MEGABYTE


def test_a_figure_that_fails_to_draw_leaves_a_caption_and_the_report_stands(monkeypatch):
    def broken(*_args, **_kwargs):
        raise ValueError("'xerr' must not contain negative values")

    monkeypatch.setattr(plots, "runtime_svg", broken)
    monkeypatch.setattr(figures, "accuracy_figure", broken)
    run = ValidationRun.from_dict(json.loads(FIXTURE.read_text()))
    run.checks += demo_like_checks()
    html = render_report(run)
    assert "runtime: figure not drawn (ValueError: &#39;xerr&#39; must not contain negative values)" in html
    failed = [c.name for c in run.checks if c.kind not in (CheckKind.APP, CheckKind.ORACLE)]
    assert failed and all(f"{name}: figure not drawn (ValueError" in html for name in failed)
    assert html.count("<figure>") == html.count("<figcaption>")
