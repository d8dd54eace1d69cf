import pytest

from infercheck.records import CheckResult, Flag, Observation
from infercheck.verdict import decide, exit_code_for


def check(name, kind="parity", flags=(), affected=True, patched_error=None):
    return CheckResult(name, kind, "m", "crit", affected, Observation("base"),
                       Observation("patched", error=patched_error), Observation("reference"), list(flags))


SYMPTOM_OK = check("symptom/repro", "symptom")


@pytest.mark.parametrize("checks,expected", [
    ([SYMPTOM_OK, check("parity/a")], "RESOLVED"),
    ([check("symptom/repro", "symptom", ["symptom_fails"]), check("parity/a", flags=["not_restored"])], "NOT_FIXED"),
    ([SYMPTOM_OK, check("app/x", "app", ["regressed"], affected=False), check("parity/a", flags=["not_restored"])],
     "COLLATERAL"),
    ([SYMPTOM_OK, check("parity/a", flags=["not_restored"])], "SYMPTOM_ONLY"),
    ([SYMPTOM_OK, check("app/cache", "app", ["workaround"])], "WORKAROUND"),
    ([SYMPTOM_OK, check("accuracy/add", "accuracy", ["underpowered"])], "INCONCLUSIVE"),
    ([SYMPTOM_OK, check("accuracy/add", "accuracy", ["unstable"])], "INCONCLUSIVE"),
    ([check("symptom/repro", "symptom", ["symptom_fails"]), check("x", flags=["error"], patched_error="crash")],
     "ERROR:run"),
])
def test_precedence(checks, expected):
    assert decide(checks, [], has_symptom=True).headline == expected


def test_not_restored_outside_affected_area_does_not_decide():
    verdict = decide([SYMPTOM_OK, check("parity/other", flags=["not_restored"], affected=False)], [], True)
    assert verdict.headline == "RESOLVED" and verdict.exit_code == 0


def test_all_flags_are_kept():
    checks = [check("symptom/repro", "symptom", ["symptom_fails"]), check("app/x", "app", ["regressed"]),
              check("acc", "accuracy", ["underpowered"])]
    verdict = decide(checks, [], True)
    assert [f.code for f in verdict.flags] == ["NOT_FIXED", "COLLATERAL", "INCONCLUSIVE"]


def test_without_symptom_only_regressions_count():
    assert decide([check("parity/a", flags=["not_restored"])], [], has_symptom=False).headline == "CLEAN"
    assert decide([check("app/x", "app", ["regressed"])], [], has_symptom=False).headline == "COLLATERAL"
    assert decide([check("app/x", "app", ["workaround"])], [], has_symptom=False).headline == "CLEAN"


def test_run_level_error_wins():
    verdict = decide([SYMPTOM_OK], [Flag("ERROR:build", None, "build failed")], True)
    assert verdict.headline == "ERROR:build" and verdict.exit_code == 1


@pytest.mark.parametrize("headline,fail_on,code", [
    ("RESOLVED", None, 0), ("CLEAN", None, 0), ("SYMPTOM_ONLY", None, 1), ("ERROR:build", None, 1),
    ("SYMPTOM_ONLY", ["COLLATERAL", "ERROR"], 0), ("ERROR:run", ["collateral", "error"], 1),
    ("RESOLVED", ["RESOLVED"], 1),
])
def test_exit_codes(headline, fail_on, code):
    assert exit_code_for(headline, fail_on) == code
