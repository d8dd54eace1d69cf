"""The code map (infercheck/codemap.py): the lines a patch changes, the functions holding them, the
map recorded from a traced run, selection from a stored map, and the committed map itself (recorded
by `infercheck codemap build` on the clean engine: fresh for every app, reaching each oracle's
feature)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from infercheck.apps import load_apps
from infercheck.build.tree import find_installed_engine
from infercheck.codemap import (CodeMap, changed_functions, changed_lines, codemap_path, lines_by_check, load_codemap,
                                record_codemap)
from infercheck.codemap_run import app_digests
from infercheck.errors import InfercheckError
from infercheck.neighbours import code_map_hits, select_neighbours

SOURCE = '''import torch


def top_k(logits, k):
    if k is None:
        return logits
    return logits.topk(k)


def top_p(logits, p):
    return logits
'''
PATCH = '''--- a/vllm/v1/sample/ops/x.py
+++ b/vllm/v1/sample/ops/x.py
@@ -4,4 +4,5 @@
 def top_k(logits, k):
     if k is None:
         return logits
-    return logits.topk(k)
+    values = logits.topk(k)
+    return values
@@ -10,2 +11,3 @@
 def top_p(logits, p):
+    p = float(p)
     return logits
--- /dev/null
+++ b/vllm/v1/sample/ops/new.py
@@ -0,0 +1,2 @@
+def fresh():
+    return 1
'''
FILE = "vllm/v1/sample/ops/x.py"


def test_changed_lines_are_removed_lines_and_the_line_an_insertion_follows():
    assert changed_lines(PATCH) == {FILE: {7, 10}}  # new files have no old side


def test_changed_functions_hold_the_changed_lines():
    assert changed_functions(PATCH, {FILE: SOURCE}) == [f"{FILE}::top_k", f"{FILE}::top_p"]
    assert changed_functions(PATCH, {}) == []  # a file the engine lacks names nothing


def test_the_map_keeps_the_functions_each_app_runs_lines_of_beyond_the_common_path():
    trace = {"g0": {FILE: [5, 6]}, "app:a:s": {FILE: [5, 6, 7, 11]}, "app:b:s": {FILE: [11]}, "": {FILE: [1, 4]}}
    checks = {"g0": ["parity/short"], "app:a:s": ["app/a"], "app:b:s": ["oracle/b"]}
    lines = lines_by_check(trace, checks)
    assert lines == {"parity/short": {FILE: {5, 6}}, "app/a": {FILE: {5, 6, 7, 11}}, "oracle/b": {FILE: {11}}}
    codemap = record_codemap("vllm 0", lines, {FILE: SOURCE}, ["parity/short"], {"app/a": "a", "oracle/b": "b"},
                             {"a": "1"})
    # top_k: a ran its line 7, which plain generation did not; top_p's line 11 every app ran: common
    assert codemap.reach == {"a": frozenset({f"{FILE}::top_k"}), "b": frozenset()}
    assert codemap.baseline == frozenset({f"{FILE}::top_k", f"{FILE}::top_p"})
    assert codemap.apps_running([f"{FILE}::top_p", f"{FILE}::top_k"]) == {"a": [f"{FILE}::top_k"]}
    assert codemap.stale({"a": "1", "b": "2"}) == ["b"]
    assert CodeMap.from_json(codemap.to_json(), "x") == replace(codemap, baseline=frozenset())  # counted, not listed
    with pytest.raises(InfercheckError, match="rebuild it with `infercheck codemap build`"):
        CodeMap.from_json('{"engine": "vllm 0"}', "x.json")
    with pytest.raises(InfercheckError, match="baseline"):
        record_codemap("vllm 0", {"app/a": {}}, {}, ["parity/short"], {}, {})


def test_selection_adds_the_apps_a_stored_map_says_run_a_changed_function(tmp_path: Path):
    (tmp_path / FILE).parent.mkdir(parents=True)
    (tmp_path / FILE).write_text(SOURCE)
    codemap = CodeMap("vllm 0", frozenset({f"{FILE}::top_k"}),
                      {"prefix-cache": frozenset({f"{FILE}::top_p"}), "logprobs": frozenset({"vllm/y.py::f"})})
    hits = code_map_hits(PATCH, [FILE, "vllm/v1/sample/ops/new.py"], tmp_path, codemap, "test map")
    assert hits.changed == (f"{FILE}::top_k", f"{FILE}::top_p") and hits.apps == {"prefix-cache": [f"{FILE}::top_p"]}
    selected = {s.name: s for s in select_neighbours([FILE], hits=hits)}
    # both reasons: the code map's function and the glob map's sampling rule
    assert selected["prefix-cache"].kind == "oracle" and selected["prefix-cache"].reasons == [f"code map: runs {FILE}::top_p"]
    assert any(r.startswith("sampling:") for r in selected["sampler-distribution"].reasons)
    assert list(selected)[0] == "prefix-cache"  # a function it runs is the most direct reason
    without = code_map_hits(PATCH, [FILE], tmp_path, None, "none.json")
    assert without.apps == {} and "glob map alone" in without.note and without.changed == hits.changed


# ---- the committed map ------------------------------------------------------------------------

ENGINE = find_installed_engine()
COMMITTED = codemap_path(ENGINE.distribution, ENGINE.version)
ORACLE_FILES = {  # each oracle reaches its feature's own files, beyond plain generation
    "sampling": ("vllm/v1/sample/ops/penalties.py", "vllm/v1/sample/ops/bad_words.py",
                 "vllm/v1/sample/logits_processor/builtin.py", "vllm/model_executor/layers/utils.py"),
    "prefix-cache": ("vllm/v1/core/block_pool.py", "vllm/v1/core/kv_cache_utils.py",
                     "vllm/v1/core/single_type_kv_cache_manager.py"),
    "positions": ("vllm/model_executor/layers/rotary_embedding/yarn_scaling_rope.py",
                  "vllm/model_executor/layers/rotary_embedding/llama3_rope.py",
                  "vllm/model_executor/layers/rotary_embedding/phi3_long_rope_scaled_rope.py",
                  "vllm/model_executor/layers/rotary_embedding/linear_scaling_rope.py"),
}


def committed() -> CodeMap:
    codemap = load_codemap(COMMITTED)
    assert codemap is not None, f"no code map for {ENGINE.distribution} {ENGINE.version}: run `infercheck codemap build`"
    return codemap


def test_the_committed_map_is_recorded_with_every_current_app_definition():
    codemap = committed()
    assert codemap.engine == f"{ENGINE.distribution} {ENGINE.version}"
    apps = load_apps()
    assert set(codemap.reach) == set(apps)
    assert codemap.stale(app_digests(apps)) == [], "an app changed since the map was recorded: `infercheck codemap build`"
    assert sum(len(r) for r in codemap.reach.values()) > 500


@pytest.mark.parametrize("oracle", sorted(ORACLE_FILES))
def test_each_oracle_reaches_its_feature_beyond_plain_generation(oracle):
    files = {f.split("::")[0] for f in committed().reach[oracle]}
    for expected in ORACLE_FILES[oracle]:
        assert expected in files, expected


def test_an_added_run_replaces_only_the_added_groups_lines():
    from infercheck.codemap_run import merged_trace

    previous = {"g0": {"vllm/a.py": [1]}, "app:old:main": {"vllm/b.py": [2]}, "app:gone:main": {"vllm/c.py": [3]}}
    fresh = {"g0": {"vllm/a.py": [1, 9]}, "app:new:main": {"vllm/d.py": [4]}, "app:old:main": {"vllm/b.py": [5]}}
    merged = merged_trace(previous, fresh, ["g0", "app:old:main", "app:new:main", "app:quiet:main"],
                          ["app:old:main", "app:new:main", "app:quiet:main"])
    assert merged == {"g0": {"vllm/a.py": [1]}, "app:old:main": {"vllm/b.py": [5]}, "app:new:main": {"vllm/d.py": [4]},
                      "app:quiet:main": {}}


def test_adding_to_a_code_map_without_a_finished_full_run_is_a_one_line_error(tmp_path):
    from infercheck.codemap_run import build_codemap

    with pytest.raises(InfercheckError, match="needs the finished full run"):
        build_codemap(tmp_path / "work", 60.0, lambda line: None, tmp_path / "map.json", add=True)
