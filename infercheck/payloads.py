"""What a check measured beyond its headline number, one record per check kind (docs/design.md,
"Records"): a `Detail` per observation (base, patched, reference) and a `Payload` per check.

Stored in results.json with a `type` tag (the class name), so `infercheck report` reads them back
into the same classes. Records only: no engine, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


def filled_fields(record: Any) -> list[tuple[str, Any]]:
    """(name, value) of every field of a dataclass that holds something, in field order."""
    return [(f.name, getattr(record, f.name)) for f in fields(record) if getattr(record, f.name) not in (None, "", [], {})]


@dataclass
class Detail:
    """One variant's secondary measurements, shown beside its value."""


@dataclass
class Payload:
    """A check's comparison across variants (paired statistics, signals, settings)."""

    def workaround_reason(self) -> str | None:
        """Why the feature looks disabled or bypassed on patched; None when nothing says so."""
        return None

    def regressed_parts(self) -> list[str]:
        """Parts of the check (e.g. an app's comparators) that held on base and fail on patched."""
        return []

    def inconclusive_reason(self) -> str | None:
        """Why the check leaves the question open (e.g. the change is never exercised); None if not."""
        return None

    def unrestored_parts(self) -> list[str]:
        """Parts of the check (e.g. engine tests) that fail on base and still fail on patched."""
        return []


# ---- parity ----------------------------------------------------------------------------------

@dataclass
class PositionSeries:
    """The worst error at each position over a check's requests, kept for the report's plots.

    Point i covers positions start + [i * bin_width, (i + 1) * bin_width): one position per point up
    to MAX_POINTS positions (checks/parity.py), past that the max within equal bins (the last may be
    shorter). Values keep 3 significant digits; a NaN counts as infinite.
    """

    bin_width: int = 1
    max_kl: list[float] = field(default_factory=list)  # empty where the check measures no KL
    max_abs_dlogprob: list[float] = field(default_factory=list)
    first_divergence: int | None = None  # the earliest failing position (a real top-1 flip; past tolerance)
    start: int = 0  # the position of the first point

    def positions(self) -> list[int]:
        """The first position each point covers."""
        return [self.start + i * self.bin_width for i in range(max(len(self.max_kl), len(self.max_abs_dlogprob)))]


@dataclass
class ParityDetail(Detail):
    positions: int
    mean_kl: float
    p99_kl: float
    top1_agreement: float  # near ties count as agreement
    near_ties: int
    max_abs_dlogprob: float
    first_divergence: int | None  # earliest over requests
    diverged_requests: int
    failed_on: list[str] = field(default_factory=list)  # the tolerances it broke, in words
    per_position: PositionSeries | None = None  # None: a run recorded before the series was kept


@dataclass
class ParityPayload(Payload):
    profile: dict[str, float]  # the thresholds judged against
    table: dict[str, float] = field(default_factory=dict)  # the dtype's table values (empty: a run from before the floor)
    floor: dict[str, float] = field(default_factory=dict)  # metric -> the measured noise floor; empty: none measured
    floor_note: str = ""  # how the floor was measured, or why there is none (checks/noise_floor.py)


# ---- accuracy ----------------------------------------------------------------------------------

@dataclass
class PairedAccuracy:
    """Two variants' per-sample 0/1 vectors compared on the same samples (checks/stats.py)."""

    n: int
    acc_a: float
    acc_b: float
    diff: float  # acc_b - acc_a
    ci_a: tuple[float, float]  # Wilson
    ci_b: tuple[float, float]  # Wilson
    diff_ci: tuple[float, float]  # paired bootstrap
    b_only_a: int  # right on a only
    c_only_b: int  # right on b only
    p_value: float  # exact McNemar
    mde: float
    tolerance: float
    significant_drop: bool  # p < alpha and diff < 0
    regression: bool  # significant_drop and -diff > tolerance
    within_margin: bool  # |diff| <= tolerance ("restored" when a is the reference)
    underpowered: bool  # mde > tolerance


@dataclass
class AccuracyPayload(Payload):
    tolerance: float
    paired_samples: int
    base_vs_patched: PairedAccuracy | None = None
    reference_vs_patched: PairedAccuracy | None = None
    reference_vs_base: PairedAccuracy | None = None


# ---- symptom-only details ----------------------------------------------------------------------

@dataclass
class AnswerDetail(Detail):
    wrong_examples: list[str] = field(default_factory=list)  # prompt tail -> answer (want ...)


@dataclass
class SaneOutputDetail(Detail):
    problems: dict[str, str] = field(default_factory=dict)  # request id -> why it is not sane


@dataclass
class PytestDetail(Detail):
    tail: str = ""  # the last lines pytest printed
    returncode: int | None = None


@dataclass
class ReferenceDetail(Detail):
    role: str  # what the reference is, in words


# ---- neighbouring applications -----------------------------------------------------------------

@dataclass
class Comparison:
    """One comparator's outcome on one variant (checks/comparators.py)."""

    comparator: str
    passed: bool
    value: float | None  # the headline number (max KL, mismatches, min p-value, ...)
    summary: str
    detail: dict[str, Any] = field(default_factory=dict)  # the comparator's own numbers
    examples: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class SampleHistogram:
    """What was sampled beside what a reference distribution expects, bin by bin, for the report's
    plots (a comparator keeps it in its detail: the sampler's tokens per combination, the sampling
    oracle's probability integral transforms)."""

    label: str  # what was sampled, e.g. "temperature=0.6, top_k=4"
    axis: str  # what the bins are, e.g. "sampled token id"
    bins: list[str] = field(default_factory=list)
    observed: list[int] = field(default_factory=list)
    expected: list[float] = field(default_factory=list)  # counts the reference implies


@dataclass
class RuntimeRecord:
    """An app's engine counters on one variant."""

    tokens_per_s: float | None = None
    hit_rate: float | None = None  # prefix-cache hits / queries
    preemptions: int | None = None
    steps: int = 0  # generate calls timed


@dataclass
class ThroughputSignal:
    """The same steps' tokens/s on patched vs base, beyond the machine's drift (checks/signals.py)."""

    median_slowdown: float
    tolerance: float
    p_value: float
    steps: int
    machine_drift: float
    flagged: bool
    why: str


def comparison_named(comparisons: list[Comparison], name: str) -> Comparison | None:
    """The comparison of the comparator `name`, or None when it did not run."""
    return next((c for c in comparisons if c.comparator == name), None)


@dataclass
class AppDetail(Detail):
    comparisons: list[Comparison] = field(default_factory=list)
    runtime: RuntimeRecord = field(default_factory=RuntimeRecord)
    failed: list[str] = field(default_factory=list)  # comparators that failed

    def comparison(self, name: str) -> Comparison | None:
        return comparison_named(self.comparisons, name)


@dataclass
class AppPayload(Payload):
    runtime: dict[str, RuntimeRecord] = field(default_factory=dict)  # variant -> counters
    regressed: list[str] = field(default_factory=list)  # comparators that held on base, fail on patched
    throughput_recorded: bool = False  # the app records throughput (None below: too few paired steps)
    throughput: ThroughputSignal | None = None
    workaround: str | None = None
    note: str | None = None

    def workaround_reason(self) -> str | None:
        return self.workaround

    def regressed_parts(self) -> list[str]:
        return list(self.regressed)


# ---- static patch signs --------------------------------------------------------------------------

@dataclass(frozen=True)
class Evidence:
    file: str
    line: int  # line number in the new file
    sign: str  # feature_off | swallowed_exception | reported_prompt | sampling_param_ignored
    text: str


@dataclass
class StaticDetail(Detail):
    evidence: list[Evidence] = field(default_factory=list)
    note: str = ""


@dataclass
class StaticPayload(Payload):
    workaround: str | None = None

    def workaround_reason(self) -> str | None:
        return self.workaround


# ---- code paths --------------------------------------------------------------------------------

@dataclass
class HunkEvidence:
    hunk: str  # "vllm/x.py:-120,3 +120,4": base lines -start,count, patched lines +start,count
    runs_code: bool  # holds a statement on either side (not only comments, blank lines, docstrings)
    executed_by: list[str] = field(default_factory=list)  # checks that ran it (added: patched, removed: base)


@dataclass
class BypassEvidence:
    file: str
    function: str
    checks: list[str] = field(default_factory=list)  # the checks that ran it on base


@dataclass
class BranchEvidence:
    file: str
    function: str  # the function holding the branch ("" at module level)
    base_line: int  # its first statement in the base file
    patched_line: int  # the same statement in the patched file
    checks: list[str] = field(default_factory=list)  # the checks that ran it on base


@dataclass
class CodePathDetail(Detail):
    functions: list[str] = field(default_factory=list)  # "file::function" this variant ran in the touched files
    note: str = ""


@dataclass
class CodePathPayload(Payload):
    files: list[str] = field(default_factory=list)  # the traced files (the patch's Python files)
    hunks: list[HunkEvidence] = field(default_factory=list)
    bypassed: list[BypassEvidence] = field(default_factory=list)
    bypassed_branches: list[BranchEvidence] = field(default_factory=list)  # outside the bypassed functions
    not_exercised: str | None = None  # why the change counts as never exercised
    workaround: str | None = None
    # unrun on patched, but only the checks the patch repaired ran them on base, outside the changed
    # functions: downstream of the fix, not counted as a route-around
    after_fix_branches: list[BranchEvidence] = field(default_factory=list)

    def workaround_reason(self) -> str | None:
        return self.workaround

    def inconclusive_reason(self) -> str | None:
        return self.not_exercised


# ---- the engine's own tests ---------------------------------------------------------------------

@dataclass
class EngineTestTransition:
    """One judged engine test across the variants, with the first line of its failure."""

    test: str  # pytest node id
    base: str  # passed / failed / error / skipped / not run
    patched: str
    message: str = ""  # the failing side's assertion, first line (patched's where it fails, else base's)


@dataclass
class EngineTestsDetail(Detail):
    counts: dict[str, int] = field(default_factory=dict)  # status -> tests, over the selected ones
    elapsed_s: float | None = None
    reused: bool = False  # the run came from the cache


@dataclass
class EngineTestsPayload(Payload):
    """The engine's own tests of the touched modules (checks/engine_tests.py): what they say of the patch."""

    tree: str = ""  # where the tests came from
    files: dict[str, str] = field(default_factory=dict)  # test file -> why it was selected
    broken: list[EngineTestTransition] = field(default_factory=list)  # passed on base, fails on patched (PASS_TO_PASS lost)
    still_failing: list[EngineTestTransition] = field(default_factory=list)  # fails on base and on patched, passes unmodified
    fixed: list[EngineTestTransition] = field(default_factory=list)  # fails on base, passes on patched (FAIL_TO_PASS)
    not_judged: list[EngineTestTransition] = field(default_factory=list)  # fails or errors on the unmodified engine here
    holding: int = 0  # judged tests passing on base and patched
    note: str = ""

    def regressed_parts(self) -> list[str]:
        return [t.test for t in self.broken]

    def unrestored_parts(self) -> list[str]:
        return [t.test for t in self.still_failing]


def tagged_classes() -> dict[str, type]:
    """Every Detail and Payload class by name: the `type` tags of results.json."""
    out: dict[str, type] = {}
    todo = [Detail, Payload]
    while todo:
        cls = todo.pop()
        out[cls.__name__] = cls
        todo.extend(cls.__subclasses__())
    return out
