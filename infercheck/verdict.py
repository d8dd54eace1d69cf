"""Flags → one headline verdict (docs/design.md, "Verdicts"); every flag is kept for the report.

Precedence, first that applies: ERROR:<stage>, NOT_FIXED, COLLATERAL, SYMPTOM_ONLY, WORKAROUND,
INCONCLUSIVE, RESOLVED. Without a symptom spec the question is only "does it regress?":
ERROR:<stage>, COLLATERAL, WORKAROUND (only a patch that looks for its judges), INCONCLUSIVE, CLEAN.
"""

from __future__ import annotations

from dataclasses import replace

from infercheck.names import APP_LIKE, PASSING_HEADLINES, CheckFlag, CheckKind, Headline, Stage, error_code
from infercheck.records import CheckResult, Flag, Verdict

SYMPTOM_ORDER = (Headline.NOT_FIXED, Headline.COLLATERAL, Headline.SYMPTOM_ONLY, Headline.WORKAROUND,
                 Headline.INCONCLUSIVE)
REGRESSION_ORDER = (Headline.COLLATERAL, Headline.WORKAROUND, Headline.INCONCLUSIVE)


def check_flags(check: CheckResult, has_symptom: bool) -> list[Flag]:
    """The verdict-level flags one check raises."""
    out = []
    for flag in check.flags:
        if flag == CheckFlag.ERROR:
            message = check.patched.error or check.base.error or "the check could not run"
            out.append(Flag(error_code(Stage.RUN), check.name, f"{check.name}: {message}"))
        elif flag == CheckFlag.SYMPTOM_FAILS and check.kind == CheckKind.SYMPTOM:
            out.append(Flag(Headline.NOT_FIXED, check.name,
                            f"{check.name}: the symptom still fails on patched ({check.criterion})"))
        elif flag == CheckFlag.REGRESSED:
            which = ", ".join(check.regressed_parts()) or "it"
            out.append(Flag(Headline.COLLATERAL, check.name,
                            f"{check.name}: {which} passed on base, fails on patched ({check.criterion})"))
        elif flag == CheckFlag.NOT_RESTORED and has_symptom and (check.affected or CheckFlag.REGRESSED not in check.flags):
            # Every check counts: one that fails on patched never leaves the headline at RESOLVED,
            # whether or not the symptom spec lists it as affected (docs/design.md, "Verdicts").
            # Outside the declared area a check that passed on base and fails on patched is
            # collateral damage (its COLLATERAL flag says so), not a symptom left standing.
            how = "still fails" if check.kind in APP_LIKE else "still differs from the reference"
            where = "in the affected area" if check.affected else "(outside the symptom's declared area)"
            unrestored = check.payload.unrestored_parts() if check.payload else []
            message = (f"{check.name}: {', '.join(unrestored)} fail(s) on base and still on patched: the bug's code is "
                       f"still there" if unrestored else f"{check.name}: patched {how} {where} ({check.criterion})")
            out.append(Flag(Headline.SYMPTOM_ONLY, check.name, message))
        elif flag == CheckFlag.GAMES_HARNESS:  # never a passing verdict, with or without a symptom spec
            out.append(Flag(Headline.WORKAROUND, check.name,
                            f"{check.name}: the patch looks for its judges: {check.workaround_reason() or 'static signs'}"))
        elif flag == CheckFlag.WORKAROUND and has_symptom:
            out.append(Flag(Headline.WORKAROUND, check.name,
                            f"{check.name}: {check.workaround_reason() or 'feature bypassed'}"))
        elif flag == CheckFlag.NOT_REPRODUCED and check.kind == CheckKind.SYMPTOM:
            out.append(Flag(Headline.INCONCLUSIVE, check.name,
                            f"{check.name}: the symptom does not reproduce on base, so its fix cannot be shown"))
        elif flag == CheckFlag.NOT_EXERCISED:
            reason = check.payload.inconclusive_reason() if check.payload else None
            out.append(Flag(Headline.INCONCLUSIVE, check.name, f"{check.name}: {reason or 'the change is never exercised'}"))
        elif flag in (CheckFlag.UNDERPOWERED, CheckFlag.UNSTABLE):
            reason = "lacks statistical power" if flag == CheckFlag.UNDERPOWERED else "disagrees with itself on repeat"
            out.append(Flag(Headline.INCONCLUSIVE, check.name, f"{check.name}: {reason}"))
    return out


def headline_of(flags: list[Flag], has_symptom: bool) -> str:
    codes = [f.code for f in flags]
    errors = [c for c in codes if c.startswith(Headline.ERROR)]
    if errors:
        return errors[0]
    for code in SYMPTOM_ORDER if has_symptom else REGRESSION_ORDER:
        if code in codes:
            return code
    return Headline.RESOLVED if has_symptom else Headline.CLEAN


def exit_code_for(headline: str, fail_on: list[str] | None = None) -> int:
    """0 for a passing headline, 1 for a failing one; `fail_on` names the failing headlines instead."""
    base = headline.split(":")[0]
    if fail_on:
        return 1 if base in {f.split(":")[0].upper() for f in fail_on} else 0
    return 0 if base in PASSING_HEADLINES else 1


def beside_workaround(flags: list[Flag], checks: list[CheckResult]) -> list[Flag]:
    """The engine's own tests still failing on patched say the bug's code is still there: a hidden
    symptom (SYMPTOM_ONLY) unless another check found the feature bypassed, then a route around the
    bug (WORKAROUND) — beside what the other checks say (docs/design.md, "Engine tests"). Beside a
    bypass, tests that held on base and fail on patched test the feature routed around: WORKAROUND
    evidence too, not damage to another application."""
    engine_tests = {c.name for c in checks if c.kind == CheckKind.ENGINE_TESTS}
    if not any(f.code == Headline.WORKAROUND and f.check not in engine_tests for f in flags):
        return flags
    return [replace(f, code=Headline.WORKAROUND)
            if f.check in engine_tests and f.code in (Headline.SYMPTOM_ONLY, Headline.COLLATERAL) else f
            for f in flags]


def decide(checks: list[CheckResult], run_errors: list[Flag], has_symptom: bool,
           fail_on: list[str] | None = None) -> Verdict:
    flags = list(run_errors) + beside_workaround([f for c in checks for f in check_flags(c, has_symptom)], checks)
    headline = headline_of(flags, has_symptom)
    return Verdict(headline, flags, exit_code_for(headline, fail_on), has_symptom)
