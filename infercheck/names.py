"""The names that flow between stages, as string enums (docs/design.md, "Records").

Every value is a `str`, so records serialise to the same JSON as plain strings and compare equal
to them; code spells the names through these enums instead of free string literals.
"""

from __future__ import annotations

from enum import StrEnum


class Variant(StrEnum):
    """The three observations of every check."""

    BASE = "base"
    PATCHED = "patched"
    REFERENCE = "reference"


ENGINE_VARIANTS = (Variant.BASE, Variant.PATCHED)  # the two engine builds (the reference is HF)


class CheckKind(StrEnum):
    SYMPTOM = "symptom"
    PARITY = "parity"
    ACCURACY = "accuracy"
    APP = "app"
    ORACLE = "oracle"
    STATIC = "static"
    CODE_PATH = "code_path"
    ENGINE_TESTS = "engine_tests"  # the engine's own unit tests of the touched modules (PASS_TO_PASS, FAIL_TO_PASS)


# Kinds that run as apps: request sets on engines of their own, graded by comparators (apps.py).
APP_LIKE = frozenset({CheckKind.APP, CheckKind.ORACLE})


class CheckFlag(StrEnum):
    """What one check says about the patch; the verdict rules (verdict.py) read these."""

    ERROR = "error"  # the patched variant crashed / hung / could not run this check where base ran
    SYMPTOM_FAILS = "symptom_fails"  # the symptom check still fails on patched
    REGRESSED = "regressed"  # passed on base, fails on patched (a significant drop for statistics)
    NOT_RESTORED = "not_restored"  # patched still differs from the reference beyond tolerance
    WORKAROUND = "workaround"  # feature disabled / bypassed (hit rate, throughput, static signs)
    UNDERPOWERED = "underpowered"  # the minimum detectable effect exceeds the tolerance
    UNSTABLE = "unstable"  # disagrees with itself on repeat
    NOT_REPRODUCED = "not_reproduced"  # the symptom check passes on base: the bug did not show
    NOT_EXERCISED = "not_exercised"  # no check executes the patch's changed lines
    GAMES_HARNESS = "games_harness"  # the patch looks for its judges (static signs): WORKAROUND with or without a symptom


UNDECIDED_FLAGS = (CheckFlag.UNDERPOWERED, CheckFlag.UNSTABLE)  # leave a question open, not answered


class EngineTestStatus(StrEnum):
    """One engine test's outcome in one engine env (pytest's words)."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"  # failed outside the test body (collection, a fixture)
    SKIPPED = "skipped"


class Headline(StrEnum):
    """Verdict headlines in precedence order (ERROR is written ERROR:<stage>)."""

    ERROR = "ERROR"
    NOT_FIXED = "NOT_FIXED"
    COLLATERAL = "COLLATERAL"
    SYMPTOM_ONLY = "SYMPTOM_ONLY"
    WORKAROUND = "WORKAROUND"
    INCONCLUSIVE = "INCONCLUSIVE"
    RESOLVED = "RESOLVED"
    CLEAN = "CLEAN"


PASSING_HEADLINES = (Headline.RESOLVED, Headline.CLEAN)


class Stage(StrEnum):
    """Where an ERROR:<stage> headline comes from."""

    BUILD = "build"
    BASE = "base"  # the unpatched engine failed: nothing can be judged
    RUN = "run"  # the patched engine failed where base ran
    REFERENCE = "reference"
    HARNESS = "harness"  # infercheck itself failed (bench records it and goes on)


def error_code(stage: Stage) -> str:
    return f"{Headline.ERROR}:{stage}"


class Notice(StrEnum):
    """Run-level flags that are not verdicts but must be shown whatever the headline."""

    EDITS_OWN_JUDGES = "EDITS_OWN_JUDGES"


class SuiteKind(StrEnum):
    PARITY = "parity"
    ACCURACY = "accuracy"


class SymptomKind(StrEnum):
    ACCURACY = "accuracy"
    PARITY = "parity"
    SANE_OUTPUT = "sane_output"
    PYTEST = "pytest"
    APP = "app"


PROMPTLESS_SYMPTOMS = (SymptomKind.PYTEST, SymptomKind.APP)  # no generation workload of their own
