"""The engine's own tests as judges (docs/design.md, "Engine tests"), pure: the selected tests'
outcomes on the unmodified engine, on base and on patched in, one check out.

Only a test that passes on the unmodified engine here is judged (one that fails or errors there
needs what this machine lacks, or is broken upstream: recorded, never judged). Of the judged ones:
passed on base, fails on patched — PASS_TO_PASS lost, REGRESSED (COLLATERAL, naming the test);
fails on base and still on patched — the bug's code is still there, NOT_RESTORED (SYMPTOM_ONLY
beside the other checks); fails on base, passes on patched — FAIL_TO_PASS, evidence for the fix.
Without base patches base is the unmodified engine, so only PASS_TO_PASS can be judged.
"""

from __future__ import annotations

from infercheck.engine_test_selection import EngineTestSelection
from infercheck.names import CheckFlag, CheckKind, EngineTestStatus, Variant
from infercheck.payloads import EngineTestsDetail, EngineTestsPayload, EngineTestTransition
from infercheck.records import CheckResult, Observation
from infercheck.run.store import UNMODIFIED, EngineTestOutcome, EngineTestRun

NAME = "engine-tests"
NOT_RUN = "not run"
EXAMPLES = 20  # rows the report's example table shows (results.json keeps every transition)


def statuses(outcomes: list[EngineTestOutcome]) -> dict[str, EngineTestOutcome]:
    return {o.test: o for o in outcomes}


def transition(test: str, base: EngineTestOutcome | None, patched: EngineTestOutcome | None) -> EngineTestTransition:
    word = lambda o: str(o.status) if o is not None else NOT_RUN  # noqa: E731
    failing = patched if patched is not None and patched.status != EngineTestStatus.PASSED else base
    return EngineTestTransition(test, word(base), word(patched), failing.message if failing is not None else "")


def judge(unmodified: list[EngineTestOutcome], base: list[EngineTestOutcome],
          patched: list[EngineTestOutcome]) -> EngineTestsPayload:
    """Sort every selected test into broken / still failing / fixed / holding / not judged (the rule above)."""
    clean, on_base, on_patched = statuses(unmodified), statuses(base), statuses(patched)
    payload = EngineTestsPayload()
    for test in dict.fromkeys([*clean, *on_base, *on_patched]):
        b, p = on_base.get(test), on_patched.get(test)
        ok = lambda o: o is not None and o.status == EngineTestStatus.PASSED  # noqa: E731
        if not ok(clean.get(test)):
            if clean.get(test) is None or clean[test].status != EngineTestStatus.SKIPPED:
                payload.not_judged.append(transition(test, clean.get(test), None))
        elif ok(b) and ok(p):
            payload.holding += 1
        elif ok(b):
            payload.broken.append(transition(test, b, p))
        elif ok(p):
            payload.fixed.append(transition(test, b, p))
        else:
            payload.still_failing.append(transition(test, b, p))
    return payload


def observation(variant: Variant, run: EngineTestRun | None, outcomes: list[EngineTestOutcome],
                failing: int, judged: int) -> Observation:
    if run is None:
        return Observation(variant, error="the engine tests did not run")
    counts = {str(s): sum(o.status == s for o in outcomes) for s in EngineTestStatus}
    detail = EngineTestsDetail({k: v for k, v in counts.items() if v}, run.elapsed_s, run.reused)
    if run.error is not None:
        return Observation(variant, detail=detail, error=run.error)
    return Observation(variant, float(failing), failing == 0, None, judged, detail)


def skipped_check(note: str) -> CheckResult:
    """The check where the engine's tests could not run (no test tree, nothing selected): said, not judged."""
    return CheckResult(NAME, CheckKind.ENGINE_TESTS, "failing engine tests", "not run", True,
                       Observation(Variant.BASE, error=note), Observation(Variant.PATCHED, error=note),
                       payload=EngineTestsPayload(note=note), why="the engine's own tests of the touched modules")


def examples(payload: EngineTestsPayload) -> list[dict[str, str]]:
    rows = [(t, word) for word, group in (("COLLATERAL: passed on base, fails on patched", payload.broken),
                                          ("bug still there: fails on base and on patched", payload.still_failing),
                                          ("supports the fix: fails on base, passes on patched", payload.fixed),
                                          ("not judged: fails on the unmodified engine", payload.not_judged))
            for t in group]
    return [{"test": t.test, "judged": word, "base": t.base, "patched": t.patched, "message": t.message}
            for t, word in rows[:EXAMPLES]]


def engine_tests_check(selection: EngineTestSelection | None, runs: dict[str, EngineTestRun],
                       outcomes: dict[str, list[EngineTestOutcome]], note: str | None) -> CheckResult:
    """The check over the stored runs (unmodified, base, patched) of the selected engine tests."""
    if note is not None or selection is None:
        return skipped_check(note or "the engine tests did not run")
    clean = runs.get(UNMODIFIED)
    if clean is None or clean.error is not None:
        return skipped_check(f"the unmodified engine's run of its tests failed: {clean.error if clean else 'not run'}")
    payload = judge(outcomes.get(UNMODIFIED, []), outcomes.get(Variant.BASE, []), outcomes.get(Variant.PATCHED, []))
    payload.tree, payload.files = selection.tree, {f.path: "; ".join(f.reasons) for f in selection.files}
    judged = payload.holding + len(payload.broken) + len(payload.still_failing) + len(payload.fixed)
    base_failing = len(payload.still_failing) + len(payload.fixed)
    obs = {v: observation(v, runs.get(v), outcomes.get(v, []), n, judged)
           for v, n in ((Variant.BASE, base_failing), (Variant.PATCHED, len(payload.broken) + len(payload.still_failing)))}
    flags = []
    base_run, patched_run = runs.get(Variant.BASE), runs.get(Variant.PATCHED)
    if obs[Variant.PATCHED].error and not obs[Variant.BASE].error:
        flags.append(CheckFlag.ERROR)
    elif not obs[Variant.PATCHED].error and not obs[Variant.BASE].error and base_run and patched_run:
        flags += [CheckFlag.REGRESSED] if payload.broken else []
        flags += [CheckFlag.NOT_RESTORED] if payload.still_failing else []
    criterion = (f"{judged} engine test(s) of the touched modules that pass on the unmodified engine pass on patched "
                 f"({len(selection.files)} file(s); {len(payload.not_judged)} failing on the unmodified engine not judged)")
    return CheckResult(NAME, CheckKind.ENGINE_TESTS, "failing engine tests", criterion, True, obs[Variant.BASE],
                       obs[Variant.PATCHED], None, flags, payload, examples(payload),
                       "the engine's own tests of the touched modules (PASS_TO_PASS, FAIL_TO_PASS)")
