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


@pytest.mark.parametrize("kind", ["parity", "app", "oracle"])
def test_a_check_failing_on_patched_never_leaves_resolved(kind):
    # Outside the declared area too: an app failing on base and patched is a symptom left standing.
    verdict = decide([SYMPTOM_OK, check(f"{kind}/other", kind, flags=["not_restored"], affected=False)], [], True)
    assert verdict.headline == "SYMPTOM_ONLY" and verdict.exit_code == 1
    assert "outside the symptom's declared area" in verdict.flags[0].message


def test_a_regression_outside_the_area_is_collateral_only():
    flags = decide([SYMPTOM_OK, check("app/x", "app", ["regressed", "not_restored"], affected=False)], [], True).flags
    assert [f.code for f in flags] == ["COLLATERAL"]
    flags = decide([SYMPTOM_OK, check("app/x", "app", ["regressed", "not_restored"], affected=True)], [], True).flags
    assert [f.code for f in flags] == ["COLLATERAL", "SYMPTOM_ONLY"]


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
