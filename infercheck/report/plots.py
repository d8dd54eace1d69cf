"""The report's plots: pure functions from plot data to an inline SVG string (docs/design.md,
"Report"), drawn with matplotlib's object API (a `Figure` of its own: no pyplot, no global figure
or backend state) and saved by its SVG backend. Text stays text (`svg.fonttype: none`) and ids are
salted with a constant, so the same data gives the same bytes; each SVG's ids carry a prefix of its
own content's hash, so many plots share one page without clashing. Every function returns None
when there is nothing to plot. Base and patched keep one colour each on every plot; the HF
reference is grey.
"""

from __future__ import annotations

import hashlib
import io
import math
import re
from dataclasses import dataclass
from typing import Callable, Iterator, TypeVar

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from infercheck.payloads import PositionSeries

COLOURS = {"base": "#0969da", "patched": "#bc4c00", "reference": "#6e7781"}
MARKERS = {"base": "o", "patched": "x", "reference": "s"}
LINES = {"base": {"linewidth": 2.2, "alpha": 0.6}, "patched": {"linewidth": 1.0}}  # base shows where they coincide
WIDTH = 6.0  # inches
STYLE = {
    "svg.fonttype": "none", "svg.hashsalt": "infercheck", "font.sans-serif": ["DejaVu Sans"],  # + generic sans-serif
    "font.size": 8, "axes.titlesize": 9, "axes.labelsize": 8, "legend.fontsize": 7,
    "xtick.labelsize": 7, "ytick.labelsize": 7, "axes.spines.top": False, "axes.spines.right": False,
}
METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}
LOG_SPAN = 100.0  # positive values spanning this factor or more get a log axis
POSITION_PANELS = (("max_kl", "max KL [nats]"), ("max_abs_dlogprob", "max |Δlogprob| [nats]"))
Data = TypeVar("Data")


# ---- plot data ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class PositionPlot:
    """Per-position errors of each variant against the reference (payloads.PositionSeries)."""

    title: str
    axis: str  # what the x axis counts: "output position", "prompt position"
    series: dict[str, PositionSeries]  # variant -> its series
    tolerance: dict[str, float]  # "max_kl" / "max_abs_dlogprob" -> the tolerance line, where one holds
    marked: str = "first divergence"  # what each series' first_divergence is, in words


@dataclass(frozen=True)
class HistogramPanel:
    label: str  # what was sampled
    bins: list[str]
    expected: list[float]  # counts the reference distribution implies
    observed: dict[str, list[int]]  # variant -> sampled counts per bin


@dataclass(frozen=True)
class HistogramPlot:
    title: str
    axis: str  # what the bins are
    panels: list[HistogramPanel]


@dataclass(frozen=True)
class AccuracyPoint:
    variant: str
    value: float
    ci: tuple[float, float] | None


@dataclass(frozen=True)
class AccuracyPlot:
    title: str
    metric: str
    points: list[AccuracyPoint]
    tolerance: float
    reference: float | None  # the tolerance band's centre; None: no reference measured


@dataclass(frozen=True)
class RuntimeMetric:
    label: str  # with its unit
    values: dict[str, list[float | None]]  # variant -> one value per app (None: not recorded)
    percent: bool = False


@dataclass(frozen=True)
class RuntimePlot:
    apps: list[str]
    metrics: list[RuntimeMetric]


# ---- rendering -----------------------------------------------------------------------------------

FONT = "font-family: 'DejaVu Sans', sans-serif"  # the font STYLE lays text out in
FONT_FAMILY = re.compile(r";? ?font-family: [^;\"]*")
NAMESPACES = re.compile(r' xmlns(:xlink)?="[^"]*"')  # HTML gives inline <svg> its namespace
COORDINATES = re.compile(r'\b(d|x|y|width|height|transform)="([^"]*)"')
DECIMALS = re.compile(r"(\.\d)\d+")


def shorter(attribute: re.Match[str]) -> str:
    """A coordinate attribute with its numbers cut to one decimal."""
    numbers = DECIMALS.sub(r"\1", attribute.group(2))
    return f'{attribute.group(1)}="{numbers}"'


def svg_text(fig: Figure) -> str:
    """The figure as an <svg> element for an HTML page: no XML prolog, doctype or namespace
    declarations (the HTML parser puts an inline <svg> in its namespace; links are SVG 2 `href`),
    coordinates to 0.1 pt (a third of the file otherwise), the font named once on the root, and ids
    prefixed by a hash of the drawing (unique on a page of many plots, the same for the same one)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata=METADATA)
    text = buf.getvalue()
    text = FONT_FAMILY.sub("", COORDINATES.sub(shorter, text[text.index("<svg"):]))
    text = NAMESPACES.sub("", text).replace("xlink:href=", "href=")
    text = text.replace("<svg ", f'<svg style="{FONT}" ', 1)
    prefix = "f" + hashlib.sha256(text.encode()).hexdigest()[:10] + "-"
    return re.sub(r'(\bid="|url\(#|href="#)', lambda m: m.group(1) + prefix, text)


def render(draw: Callable[[Data], Figure | None], data: Data) -> str | None:
    """`draw(data)` as SVG text under STYLE, None when it draws nothing. matplotlib reads the SVG
    settings only from its rcParams, so they are set for this call alone and restored after."""
    with matplotlib.rc_context(STYLE):
        fig = draw(data)
        return None if fig is None else svg_text(fig)


def figure_legend(fig: Figure, axes: list[Axes]) -> None:
    """One legend for the figure, under the plots: every label once, in drawing order."""
    seen: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="outside lower center", ncols=min(len(seen), 5),
                   frameon=False)


def finite_positive(values: list[float]) -> list[float]:
    return [v for v in values if math.isfinite(v) and v > 0]


def wants_log(values: list[float]) -> bool:
    """Positive values spanning LOG_SPAN or more, or zeros beside positives that are all small."""
    positive = finite_positive(values)
    if not positive:
        return False
    return max(positive) / min(positive) >= LOG_SPAN or (any(v == 0 for v in values) and max(positive) < 1e-2)


def drawable(values: list[float], floor: float | None) -> list[float]:
    """Values for a line: non-finite ones left out (NaN: a gap), zeros at the log axis's floor."""
    return [math.nan if not math.isfinite(v) else (floor if floor is not None and v <= 0 else v) for v in values]


def mark_non_finite(ax: Axes, key: str, variant: str, xs: list[int], values: list[float]) -> None:
    """Triangles at the top of the axes where a value is infinite (or was NaN)."""
    at = [x for x, v in zip(xs, values) if not math.isfinite(v)]
    if at:
        ax.plot(at, [0.96] * len(at), "^", color=COLOURS[variant], transform=ax.get_xaxis_transform(),
                clip_on=False, markersize=4, label=f"{variant}: infinite", gid=f"{variant}-{key}-infinite")


def mark_divergences(ax: Axes, key: str, plot: PositionPlot, label: bool) -> None:
    """A dotted vertical line per variant at its first divergence, named on the top panel."""
    for n, (variant, s) in enumerate(plot.series.items()):
        if s.first_divergence is None:
            continue
        ax.axvline(s.first_divergence, color=COLOURS[variant], linestyle=":", linewidth=1.2,
                   gid=f"{variant}-{key}-first-divergence")
        if label:
            ax.annotate(f"{plot.marked} ({variant}): {s.first_divergence}", (s.first_divergence, 1.0),
                        xycoords=ax.get_xaxis_transform(), xytext=(3, -8 - 9 * n),
                        textcoords="offset points", color=COLOURS[variant], fontsize=7,
                        bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1})


def position_figure(plot: PositionPlot) -> Figure | None:
    """Per-position max KL and max |Δlogprob| of base and patched against the reference: one panel
    per metric any variant measured, the tolerance dashed, each first divergence dotted."""
    panels = [(key, label) for key, label in POSITION_PANELS if any(getattr(s, key) for s in plot.series.values())]
    if not panels:
        return None
    fig = Figure(figsize=(WIDTH, 0.8 + 1.6 * len(panels)), layout="constrained")
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for n, (ax, (key, label)) in enumerate(zip(axes, panels)):
        every = [v for s in plot.series.values() for v in getattr(s, key)]
        log = wants_log(every)
        floor = min(finite_positive(every)) / 10 if log else None
        for variant, s in plot.series.items():
            values = getattr(s, key)
            if not values:
                continue
            xs = s.positions()[:len(values)]
            ax.plot(xs, drawable(values, floor), color=COLOURS[variant], label=variant, **LINES.get(variant, {}),
                    drawstyle="steps-post" if s.bin_width > 1 else "default", gid=f"{variant}-{key}",
                    marker="." if len(values) <= 32 else None, markersize=3)
            mark_non_finite(ax, key, variant, xs, values)
        if key in plot.tolerance:
            tolerance = plot.tolerance[key]
            ax.axhline(tolerance, color=COLOURS["reference"], linestyle="--", linewidth=0.9, label="tolerance",
                       gid=f"tolerance-{key}")
            ax.annotate(f"tolerance {tolerance:g}", (0.0, tolerance), xycoords=ax.get_yaxis_transform(),
                        xytext=(2, 2), textcoords="offset points", color=COLOURS["reference"], fontsize=6)
        if log:
            ax.set_yscale("log")
        mark_divergences(ax, key, plot, label=n == 0)
        ax.set_ylabel(label)
    axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[-1].set_xlabel(plot.axis)
    fig.suptitle(plot.title, x=0.01, ha="left", fontsize=9)
    figure_legend(fig, list(axes))
    return fig


def grid_shape(count: int, most: int = 3) -> tuple[int, int]:
    columns = min(count, most)
    return math.ceil(count / columns), columns


def histogram_figure(plot: HistogramPlot) -> Figure | None:
    """Sampled counts per bin (markers, one per variant) over the counts the reference
    distribution implies (grey bars), one panel per sampled distribution."""
    panels = [p for p in plot.panels if p.bins and (sum(p.expected) or any(map(sum, p.observed.values())))]
    if not panels:
        return None
    rows, columns = grid_shape(len(panels))
    fig = Figure(figsize=(WIDTH, 0.8 + 1.6 * rows), layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    for n, (ax, panel) in enumerate(zip(axes, panels)):
        xs = list(range(len(panel.bins)))
        ax.stairs(panel.expected, [x - 0.5 for x in range(len(xs) + 1)], fill=True, color=COLOURS["reference"],
                  alpha=0.35, label="reference expects", gid=f"reference-expected-{n}")
        for variant, counts in panel.observed.items():
            ax.plot(xs, counts, MARKERS[variant], color=COLOURS[variant], markersize=3.5, label=f"{variant} sampled",
                    gid=f"{variant}-sampled-{n}")
        rotate = sum(len(b) + 1 for b in panel.bins) * columns > 90  # characters across the figure
        ax.set_xticks(xs, panel.bins, rotation=90 if rotate else 0, fontsize=6 if columns > 1 else 7)
        ax.set_title(panel.label, fontsize=7 if columns > 1 else 8)
        ax.set_ylabel("count")
    for ax in axes[len(panels):]:
        ax.set_axis_off()
    for ax in axes[len(panels) - columns:len(panels)]:  # the lowest panel of each column
        ax.set_xlabel(plot.axis)
    fig.suptitle(plot.title, x=0.01, ha="left", fontsize=9)
    figure_legend(fig, [axes[0]])
    return fig


def accuracy_figure(plot: AccuracyPlot) -> Figure | None:
    """Each variant's accuracy with its confidence interval, beside the band the reference's
    accuracy ± the tolerance spans."""
    points = [p for p in plot.points if math.isfinite(p.value)]
    if not points:
        return None
    fig = Figure(figsize=(WIDTH, 0.9 + 0.35 * len(points)), layout="constrained")
    ax = fig.subplots()
    if plot.reference is not None:
        ax.axvspan(plot.reference - plot.tolerance, plot.reference + plot.tolerance, color=COLOURS["reference"],
                   alpha=0.15, label=f"reference ± tolerance {plot.tolerance:g}", gid="tolerance-band")
    for y, p in enumerate(points):
        # the interval is over the paired samples, the value over all a variant answered: it may lie outside
        err = [[max(0.0, p.value - p.ci[0])], [max(0.0, p.ci[1] - p.value)]] if p.ci else None
        drawn = ax.errorbar([p.value], [y], xerr=err, fmt=MARKERS[p.variant], color=COLOURS[p.variant], capsize=3,
                            markersize=4)
        drawn.lines[0].set_gid(f"{p.variant}-accuracy")  # the point (its bars and caps are drawn apart)
    ax.set_yticks(range(len(points)), [p.variant for p in points])
    ax.set_ylim(-0.6, len(points) - 0.4)
    ax.invert_yaxis()
    ax.set_xlabel(f"{plot.metric} (fraction of samples, 95% interval)")
    fig.suptitle(plot.title, x=0.01, ha="left", fontsize=9)
    figure_legend(fig, [ax])
    return fig


def bar_rows(count: int, variants: list[str], height: float) -> Iterator[tuple[str, list[float]]]:
    """Each variant's bar centres, side by side within each of `count` rows."""
    for i, variant in enumerate(variants):
        yield variant, [row - 0.4 + height * (i + 0.5) for row in range(count)]


def runtime_figure(plot: RuntimePlot) -> Figure | None:
    """Base and patched side by side per app, one panel per runtime metric any app recorded."""
    metrics = [m for m in plot.metrics if any(v is not None for vs in m.values.values() for v in vs)]
    if not plot.apps or not metrics:
        return None
    fig = Figure(figsize=(WIDTH, 0.9 + 0.3 * len(plot.apps)), layout="constrained")
    axes = fig.subplots(1, len(metrics), sharey=True, squeeze=False)[0]
    for m, (ax, metric) in enumerate(zip(axes, metrics)):
        height = 0.8 / len(metric.values)
        for variant, ys in bar_rows(len(plot.apps), list(metric.values), height):
            values = [math.nan if v is None else (100 * v if metric.percent else v) for v in metric.values[variant]]
            bars = ax.barh(ys, values, height=height, color=COLOURS[variant], label=variant)
            ax.bar_label(bars, fmt="{:.0f}%" if metric.percent else "{:.0f}", padding=2, fontsize=6)
            for a, bar in enumerate(bars):
                bar.set_gid(f"{variant}-metric{m}-app{a}")
        ax.set_xlabel(metric.label)
        if metric.percent:
            ax.set_xlim(0, 115)  # room for a label beside a full bar
            ax.set_xticks(range(0, 101, 25))
        else:
            ax.margins(x=0.15)
            ax.set_xlim(left=0)
    axes[0].set_yticks(range(len(plot.apps)), plot.apps)
    axes[0].invert_yaxis()
    fig.suptitle("Runtime, base → patched", x=0.01, ha="left", fontsize=9)
    figure_legend(fig, [axes[0]])
    return fig


# ---- the plots, as SVG text ------------------------------------------------------------------------

def position_svg(plot: PositionPlot) -> str | None:
    """Per-position max KL and max |Δlogprob| of each variant, tolerance and first divergences marked."""
    return render(position_figure, plot)


def histogram_svg(plot: HistogramPlot) -> str | None:
    """Sampled counts over the reference distribution's expected counts, a panel per distribution."""
    return render(histogram_figure, plot)


def accuracy_svg(plot: AccuracyPlot) -> str | None:
    """Each variant's accuracy and confidence interval beside the reference ± tolerance band."""
    return render(accuracy_figure, plot)


def runtime_svg(plot: RuntimePlot) -> str | None:
    """Prefix-cache hit rate and tokens/s per app, base beside patched."""
    return render(runtime_figure, plot)
