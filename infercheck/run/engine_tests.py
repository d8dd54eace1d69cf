"""The engine's own tests of the touched modules, run in one engine env (docs/design.md, "Engine
tests"): the selected node ids (engine_test_selection.py) under pytest, held like a worker
(run/pytest_runner.py: the same containment and a view of its own holding the engine and the test
tree's `tests/` at `suite/tests`), vLLM's conftest left out (`--noconftest`: it imports CUDA, Ray
and model-download fixtures this machine lacks). Per-test outcomes are pytest's junit report in the
run's folder (run/store.py `parse_junit`); a decided run (tests passed or failed, a report written)
is cached by content: the node ids, the test files, the engine env and the code that runs them.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict
from pathlib import Path

from infercheck.build.engine_env import EngineEnv
from infercheck.paths import cache_dir
from infercheck.run.cache import PYTEST_CODE, PYTEST_DECIDED, digest_files, engine_identity, reuse_entry, store_entry
from infercheck.run.pytest_runner import JUNIT, PytestPlace, run_pytest_contained
from infercheck.run.launcher import REUSED_FROM
from infercheck.run.slots import Placement, unplaced
from infercheck.run.store import EngineTestRun
from infercheck.engine_test_tree import TESTS, EngineTestTree

SUITE = "suite"  # the test tree's root in a view: its tests/ at suite/tests, the working folder
# Each test file's own code only (vLLM's conftest needs what the machine lacks); xunit1 keeps each
# test's file, so its node id can be read back.
PER_TEST_TIMEOUT_S = 120  # pytest-timeout: a hung test fails alone (and, failing on the unmodified engine, is not judged)
ENGINE_TEST_ARGS = ("--noconftest", "-o", "junit_family=xunit1", "-W", "ignore::pytest.PytestUnknownMarkWarning",
                    "-o", f"timeout={PER_TEST_TIMEOUT_S}")
THIS_CODE = Path(__file__).resolve()


def tree_place(tree: EngineTestTree) -> PytestPlace:
    return PytestPlace(((str(tree.tests), f"{SUITE}/{TESTS}"),), SUITE, tree.root)


def engine_tests_key(tree: EngineTestTree, node_ids: list[str], env: EngineEnv) -> str:
    """A run's cache key: the node ids, the tree (its folder is named by its release or git tree) and
    the selected files' text, the engine env and the code that runs them."""
    files = sorted({tree.root / n.split("::", 1)[0] for n in node_ids})
    parts = {"nodes": node_ids, "tree": tree.root.name, "files": digest_files([f for f in files if f.is_file()]),
             "engine": engine_identity(env), "code": digest_files([*PYTEST_CODE, THIS_CODE])}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:24]


def run_engine_tests(tree: EngineTestTree, node_ids: list[str], env: EngineEnv, out_dir: Path,
                     timeout_s: float) -> EngineTestRun:
    """The node ids in env; never raises for what the tests do."""
    started = time.time()
    returncode, log = run_pytest_contained(tree_place(tree), env, out_dir, timeout_s,
                                           [*ENGINE_TEST_ARGS, *node_ids])
    elapsed = round(time.time() - started, 2)
    if returncode is None:
        return EngineTestRun(None, elapsed, f"timed out after {timeout_s:g}s")
    if not (out_dir / JUNIT).is_file():
        last = [line for line in log.strip().splitlines() if line.strip()][-1:] or ["no output"]
        return EngineTestRun(returncode, elapsed, f"pytest wrote no report (exit {returncode}): {last[0][:200]}")
    return EngineTestRun(returncode, elapsed)


def run_engine_tests_cached(tree: EngineTestTree, node_ids: list[str], env: EngineEnv, out_dir: Path, timeout_s: float,
                            reuse: bool = True, cache_root: Path | None = None,
                            place: Placement = unplaced) -> EngineTestRun:
    """run_engine_tests, or the same run's stored report when it was decided before (cache_root:
    default <cache>/engine-test-runs); a run that is not stored runs where `place` puts it."""
    entry = (cache_root or cache_dir() / "engine-test-runs") / engine_tests_key(tree, node_ids, env)
    stored = reuse_entry(entry, out_dir) if reuse else None
    if stored is not None:
        return EngineTestRun(**{**stored, "reused": True})
    (out_dir / REUSED_FROM).unlink(missing_ok=True)
    with place(env) as placed:
        run = run_engine_tests(tree, node_ids, placed, out_dir, timeout_s)
    if run.returncode in PYTEST_DECIDED and run.error is None:
        store_entry(entry, out_dir, asdict(run))
    return run
