"""Numbers in the HTML report's tables with what they are: "max KL 2.9e-6", "comparators failing:
1 of 2", "exact match 0.93 [0.88, 0.96]", "128 positions". The page's alone: verdict.json, junit.xml
and summary.md keep their formats (regrade reproduces verdict.json byte for byte)."""

from __future__ import annotations

import math
import re

from infercheck.names import CheckKind, Variant
from infercheck.payloads import AppDetail, ParityDetail
from infercheck.records import CheckResult, Observation

METRIC_NAMES = {"max_kl": "max KL", "exact_match": "exact match", "acc": "accuracy", "sane_output": "sane outputs",
                "signs": "signs found:"}
EXPONENT = re.compile(r"e([+-])0*(\d)")


def number(value: float) -> str:
    """3 significant digits, the exponent unpadded: 2.9e-6, 0.912, 812."""
    if not math.isfinite(value):
        return str(value)
    return EXPONENT.sub(lambda m: "e" + m.group(1).replace("+", "") + m.group(2), f"{value:.3g}")


def metric_name(metric: str) -> str:
    return METRIC_NAMES.get(metric, metric.replace("_", " "))


def measured(check: CheckResult, variant: Variant | str, interval: bool = True) -> str:
    """One variant's headline value named by its metric, with its interval where it has one (and
    `interval`); "—" where it has no value."""
    obs = check.observation(variant)
    if obs is None or obs.value is None:
        return "—"
    if isinstance(obs.detail, AppDetail):
        return f"comparators failing: {int(obs.value)} of {len(obs.detail.comparisons)}"
    if check.kind == CheckKind.CODE_PATH:  # base counts the functions it ran, patched the hunks it executed
        return f"functions run: {int(obs.value)}" if obs.n is None else f"hunks executed: {int(obs.value)} of {obs.n}"
    text = f"{metric_name(str(check.metric))} {number(obs.value)}"
    return text + (f" [{number(obs.ci[0])}, {number(obs.ci[1])}]" if obs.ci and interval else "")


def counted(check: CheckResult, obs: Observation) -> str:
    """What the observation's n counts: "128 positions", "200 samples", "6 requests"; "—" without one."""
    if obs.n is None:
        return "—"
    if isinstance(obs.detail, ParityDetail):
        unit = "positions"
    elif check.kind == CheckKind.ACCURACY:
        unit = "samples"
    elif check.kind == CheckKind.CODE_PATH:
        unit = "changed hunks"
    else:
        unit = "requests"
    return f"{obs.n} {unit}"
