"""Flags → one headline verdict (DESIGN.md "Verdicts"); every flag is kept for the report.

Precedence, first that applies: ERROR:<stage>, NOT_FIXED, COLLATERAL, SYMPTOM_ONLY, WORKAROUND,
INCONCLUSIVE, RESOLVED. Without a symptom spec the question is only "does it regress?":
ERROR:<stage>, COLLATERAL, INCONCLUSIVE, CLEAN.
"""

from __future__ import annotations

from infercheck.checks.records import (FLAG_ERROR, FLAG_NOT_REPRODUCED, FLAG_NOT_RESTORED, FLAG_REGRESSED, FLAG_SYMPTOM_FAILS,
                                       FLAG_UNDERPOWERED, FLAG_UNSTABLE, FLAG_WORKAROUND, CheckResult, Flag,
                                       Verdict)

PASSING = ("RESOLVED", "CLEAN")
HEADLINES = ("ERROR", "NOT_FIXED", "COLLATERAL", "SYMPTOM_ONLY", "WORKAROUND", "INCONCLUSIVE", "RESOLVED", "CLEAN")


def check_flags(check: CheckResult, has_symptom: bool) -> list[Flag]:
    """The verdict-level flags one check raises."""
    out = []
    for flag in check.flags:
        if flag == FLAG_ERROR:
            message = check.patched.error or check.base.error or "the check could not run"
            out.append(Flag("ERROR:run", check.name, f"{check.name}: {message}"))
        elif flag == FLAG_SYMPTOM_FAILS and check.kind == "symptom":
            out.append(Flag("NOT_FIXED", check.name, f"{check.name}: the symptom still fails on patched ({check.criterion})"))
        elif flag == FLAG_REGRESSED:
            which = ", ".join(check.comparison.get("regressed") or []) or "it"
            out.append(Flag("COLLATERAL", check.name, f"{check.name}: {which} passed on base, fails on patched ({check.criterion})"))
        elif flag == FLAG_NOT_RESTORED and check.affected and has_symptom:
            how = "still fails" if check.kind == "app" else "still differs from the reference"
            out.append(Flag("SYMPTOM_ONLY", check.name, f"{check.name}: patched {how} in the affected area ({check.criterion})"))
        elif flag == FLAG_WORKAROUND and has_symptom:
            out.append(Flag("WORKAROUND", check.name, f"{check.name}: {check.comparison.get('workaround', 'feature bypassed')}"))
        elif flag == FLAG_NOT_REPRODUCED and check.kind == "symptom":
            out.append(Flag("INCONCLUSIVE", check.name,
                            f"{check.name}: the symptom does not reproduce on base, so its fix cannot be shown"))
        elif flag in (FLAG_UNDERPOWERED, FLAG_UNSTABLE):
            reason = "lacks statistical power" if flag == FLAG_UNDERPOWERED else "disagrees with itself on repeat"
            out.append(Flag("INCONCLUSIVE", check.name, f"{check.name}: {reason}"))
    return out


def headline_of(flags: list[Flag], has_symptom: bool) -> str:
    codes = [f.code for f in flags]
    errors = [c for c in codes if c.startswith("ERROR")]
    if errors:
        return errors[0]
    order = ("NOT_FIXED", "COLLATERAL", "SYMPTOM_ONLY", "WORKAROUND", "INCONCLUSIVE") if has_symptom \
        else ("COLLATERAL", "INCONCLUSIVE")
    for code in order:
        if code in codes:
            return code
    return "RESOLVED" if has_symptom else "CLEAN"


def exit_code_for(headline: str, fail_on: list[str] | None = None) -> int:
    """0 for a passing headline, 1 for a failing one; `fail_on` names the failing headlines instead."""
    base = headline.split(":")[0]
    if fail_on:
        return 1 if base in {f.split(":")[0].upper() for f in fail_on} else 0
    return 0 if base in PASSING else 1


def decide(checks: list[CheckResult], run_errors: list[Flag], has_symptom: bool,
           fail_on: list[str] | None = None) -> Verdict:
    flags = list(run_errors) + [f for c in checks for f in check_flags(c, has_symptom)]
    headline = headline_of(flags, has_symptom)
    return Verdict(headline, flags, exit_code_for(headline, fail_on), has_symptom)
