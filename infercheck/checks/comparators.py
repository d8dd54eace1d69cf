"""The comparator registry: every comparator an app can name in its `compare:` list.

A comparator is one function decorated with `@comparator(...)`, which declares what it needs from
the run (`reference`: the HF reference's teacher-forced scoring of the app's outputs;
`full_distributions`: that scoring over the whole vocabulary, not only the engine's top-k;
`processed`: also each request's logits processing rebuilt from its sampling params; `prompts`:
the reference's scoring of every prompt position, at the engine's prompt top-k, and nothing of the
outputs), how its
detail is shown (`shown`: the detail keys the report lists, in order; empty shows every key) and,
optionally, the workaround sign it reads from base's comparison against patched's (`workaround`).
The plan reads the needs (which outputs the reference scores), the app loader the names (an
unknown comparator is a one-line error), the report the display. Adding a comparator touches this
file and the app YAML that names it: docs/design.md, "Adding a comparator".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from infercheck.app_ids import app_of
from infercheck import position_grid, prefix_grid
from infercheck.checks import app_compare as cmp
from infercheck.checks import positions as position_checks
from infercheck.checks import prefix_cache
from infercheck.checks import sampling_oracle as oracle
from infercheck.draw import Draw
from infercheck.payloads import Comparison, comparison_named
from infercheck.run.job import RequestResult
from infercheck.specs import App


@dataclass(frozen=True)
class ComparatorInput:
    """One app's results on one variant, with what a comparator may read beside them."""

    app: App
    results: list[RequestResult]
    refs: dict[str, RequestResult]  # engine request id -> the reference's scoring of it
    params: dict[str, dict[str, Any]]  # engine request id -> its sampling params
    profile: dict[str, float]  # the tolerance profile (suites/tolerances.yaml) of the run's dtype
    draw: Draw = Draw()  # the run's prompt draw (what a comparator rebuilding the requests needs)

    @property
    def workload(self) -> dict[str, Any]:
        return self.app.workload

    def own_params(self) -> dict[str, dict[str, Any]]:
        """Sampling params of every request this app planned (whether or not it has a result)."""
        return {rid: p for rid, p in self.params.items() if app_of(rid) == self.app.name}


CompareFn = Callable[[ComparatorInput, dict[str, Any]], Comparison]
WorkaroundFn = Callable[[Comparison | None, Comparison | None], str | None]  # (base, patched) -> why, or None


@dataclass(frozen=True)
class Comparator:
    name: str
    compare: CompareFn  # (input, the app's options for this comparator) -> Comparison
    reference: bool
    full_distributions: bool
    processed: bool
    shown: tuple[str, ...]
    doc: str
    workaround: WorkaroundFn | None = None
    prompts: bool = False
    # The sign reads base as the unmodified engine's behaviour (not a bug's): withheld where base
    # carries base patches (a case's bug), whose difference from patched may be the bug itself.
    sign_needs_unmodified_base: bool = False

    def shown_detail(self, detail: dict[str, Any]) -> dict[str, Any]:
        """The part of a Comparison's detail the report lists."""
        return {k: detail[k] for k in self.shown if k in detail} if self.shown else dict(detail)


REGISTRY: dict[str, Comparator] = {}


def comparator(name: str, *, reference: bool = False, full_distributions: bool = False, processed: bool = False,
               prompts: bool = False, shown: tuple[str, ...] = (), workaround: WorkaroundFn | None = None,
               sign_needs_unmodified_base: bool = False) -> Callable[[CompareFn], CompareFn]:
    """Register `fn` as the comparator `name` (see the module docstring)."""
    def register(fn: CompareFn) -> CompareFn:
        if name in REGISTRY:
            raise ValueError(f"comparator {name!r} registered twice")
        REGISTRY[name] = Comparator(name, fn, reference or full_distributions or processed or prompts,
                                    full_distributions or processed, processed, shown,
                                    (fn.__doc__ or "").strip().split("\n")[0], workaround, prompts,
                                    sign_needs_unmodified_base)
        return fn
    return register


def needs_reference(names: tuple[str, ...]) -> bool:
    return any(REGISTRY[n].reference for n in names)


def needs_full_distributions(names: tuple[str, ...]) -> bool:
    return any(REGISTRY[n].full_distributions for n in names)


def needs_prompt_scoring(names: tuple[str, ...]) -> bool:
    """The reference scores every prompt position too (the position oracle)."""
    return any(REGISTRY[n].prompts for n in names)


def needs_continuations(names: tuple[str, ...]) -> bool:
    """Some comparator reads the reference's scoring of the engine's outputs (not only the prompt's
    positions): without one, the prompt's scoring serves every engine that served that prompt."""
    return any(REGISTRY[n].reference and not REGISTRY[n].prompts for n in names)


def needs_processing(names: tuple[str, ...]) -> bool:
    """The reference rebuilds each request's logits processing (the sampling oracle)."""
    return any(REGISTRY[n].processed for n in names)


def workaround_signs(names: tuple[str, ...], base: list[Comparison], patched: list[Comparison],
                     base_unmodified: bool = True) -> list[str]:
    """The workaround signs the app's comparators declare, each from its base and patched comparisons;
    base_unmodified: base is the unmodified engine (no base patches), which some signs need."""
    signs = [(REGISTRY[n].workaround, n) for n in names if REGISTRY[n].workaround is not None
             and (base_unmodified or not REGISTRY[n].sign_needs_unmodified_base)]
    return [why for sign, n in signs if (why := sign(comparison_named(base, n), comparison_named(patched, n)))]


def run_comparators(inp: ComparatorInput) -> list[Comparison]:
    """The app's comparators, in its `compare:` order."""
    return [REGISTRY[name].compare(inp, inp.app.options_for(name)) for name in inp.app.compare]


# ---- the comparators -------------------------------------------------------------------------

@comparator("reference", reference=True,
            shown=("max_kl", "mean_kl", "max_abs_dlogprob", "top1_agreement", "diverged", "failed_on"))
def reference(inp: ComparatorInput, options: dict[str, Any]) -> Comparison:
    """Greedy outputs match the HF reference, teacher-forced, within the dtype's tolerances."""
    return cmp.compare_reference(inp.results, inp.refs, inp.profile)


@comparator("consistency", shown=("pairs", "mismatches", "missing"))
def consistency(inp: ComparatorInput, options: dict[str, Any]) -> Comparison:
    """Set `b`'s outputs equal set `a`'s for every shared key (near ties excepted)."""
    return cmp.compare_consistency(inp.results, options["a"], options["b"], inp.profile["near_tie"])


@comparator("seeded", shown=("repeats", "mismatches"))
def seeded(inp: ComparatorInput, options: dict[str, Any]) -> Comparison:
    """Every repeat of a seeded request gives the same tokens."""
    return cmp.compare_seeded(inp.results)


@comparator("sampler", full_distributions=True, shown=("alpha", "combinations"))
def sampler(inp: ComparatorInput, options: dict[str, Any]) -> Comparison:
    """Sampled tokens fit the exact distribution the reference implies for their parameters."""
    return cmp.compare_sampler(inp.results, inp.refs, inp.params, float(options.get("alpha", 0.001)),
                               float(options.get("min_expected", 5)))


@comparator("logprobs", full_distributions=True)
def logprobs(inp: ComparatorInput, options: dict[str, Any]) -> Comparison:
    """Raw, processed and prompt logprobs equal the reference's log-softmax (at the temperature)."""
    temperature = float((inp.workload.get("processed_sampling") or {}).get("temperature", 0.7))
    return cmp.compare_logprobs(inp.results, inp.refs, temperature, inp.profile["max_abs_dlogprob"])


@comparator("structured", full_distributions=True, shown=("invalid", "off_steps", "outputs"))
def structured(inp: ComparatorInput, options: dict[str, Any]) -> Comparison:
    """Outputs are valid against the schema and each step takes the reference's best allowed token."""
    return cmp.compare_structured(inp.results, inp.refs, inp.workload["schema"], inp.profile["near_tie"])


@comparator("stop", shown=("stop_triggered", "problems"))
def stop(inp: ComparatorInput, options: dict[str, Any]) -> Comparison:
    """Stopped outputs end at the first stop string (kept or cut); n>1 completions likewise."""
    w = inp.workload
    return cmp.compare_stop(inp.results, list(w["stops"]), int(w.get("n", 4)), int(w.get("max_tokens", 24)),
                            bool(w.get("include_stop_str_in_output")))


@comparator("distributions", processed=True, shown=("failing_parameters", "tolerance", "max_kl"))
def distributions(inp: ComparatorInput, options: dict[str, Any]) -> Comparison:
    """Every row, plan and mode returns the reference's raw or processed distribution at every position."""
    return oracle.compare_distributions(inp.results, inp.refs, inp.own_params(), inp.profile["max_abs_dlogprob"],
                                        inp.profile["max_kl"])


@comparator("samples", processed=True, shown=("sampled", "pit_p_value", "impossible", "failing_parameters"))
def samples(inp: ComparatorInput, options: dict[str, Any]) -> Comparison:
    """Sampled tokens lie in, and fit, the processed reference distribution; greedy ones are its argmax."""
    return oracle.compare_samples(inp.results, inp.refs, inp.own_params(), float(options.get("alpha", 0.001)),
                                  inp.profile["near_tie"])


@comparator("seeds", processed=True, shown=("seeded_repeats", "unseeded_rows", "problems", "failing_parameters"))
def seeds(inp: ComparatorInput, options: dict[str, Any]) -> Comparison:
    """Seeded rows repeat in every plan and mode; unseeded rows and n>1 completions do not."""
    return oracle.compare_seeds(inp.results, inp.refs, inp.own_params(), float(options.get("alpha", 0.001)))


@comparator("prefix-cache", shown=("requests", "false_sharing", "lost_reuse_tokens", "diverged", "failing_cells"),
            workaround=prefix_cache.lost_reuse_sign)
def prefix_cache_hits(inp: ComparatorInput, options: dict[str, Any]) -> Comparison:
    """Each cached request gets the ideal prefix cache's cached tokens and its uncached twin's outputs."""
    return prefix_cache.compare_prefix_cache(inp.results, prefix_grid.cache_sets(inp.workload, inp.draw), inp.profile["near_tie"])


@comparator("positions", prompts=True, shown=("failing_cells", "first_failure", "tolerance", "positions"),
            workaround=position_checks.bypassed_kernel_sign, sign_needs_unmodified_base=True)
def positions(inp: ComparatorInput, options: dict[str, Any]) -> Comparison:
    """Prompt logprobs at every prompt position of every config variant match the reference's, per bucket."""
    return position_checks.compare_positions(inp.results, inp.refs, position_grid.buckets(inp.workload),
                                             position_checks.tolerances(options, inp.profile))
