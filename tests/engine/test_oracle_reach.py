"""What each oracle executes in the engine, and that the neighbour map sends it there.

A real vLLM-CPU worker runs the oracle's groups between two baseline groups — the same requests
without the feature — under the worker's tracer (coverage.py, one context per group). For the
sampling oracle: a reduced grid (every logprobs mode; the field, mixed and staggered plans) beside
plain greedy groups of the same batch shapes; for the prefix-cache oracle: its cached engines
beside its own uncached set; for the position oracle: its config variants beside the bundled
model's own config on the same prompt cut to that model's context. The functions the oracle groups execute and the baseline groups do not
are the code the feature reaches; every one must be listed in suites/oracles/reach/<oracle>.yaml
(whose files the unit test tests/unit/test_neighbours.py checks against the map).
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from infercheck.apps import ModelFacts, app_sets, load_apps
from infercheck.code_paths import functions_at
from infercheck.models import zoo
from infercheck.paths import SUITES_DIR
from infercheck.prefix_grid import UNCACHED
from infercheck.run.job import TRACE, Group, Job, Request
from infercheck.run.launcher import launch
from infercheck.build.engine_env import installed_env
from infercheck.device import detect_device
from tests.engine.conftest import WORKER_TIMEOUT_S

pytestmark = pytest.mark.engine

REACH = SUITES_DIR / "oracles" / "reach"
MODEL = "tiny-llama-add"


def vllm_root() -> Path:
    spec = importlib.util.find_spec("vllm")
    assert spec is not None and spec.submodule_search_locations
    return Path(list(spec.submodule_search_locations)[0])


def sampling_groups() -> tuple[list[Group], Group]:
    oracle = load_apps()["sampling"]
    reduced = replace(oracle, workload={**oracle.workload, "plans": ["field", "mixed", "staggered"]})
    sets = app_sets(reduced, ModelFacts.of(zoo.model_dir(MODEL)))
    groups = [Group(f"oracle:{s.name}", s.engine_args, s.requests) for s in sets]
    return groups, greedy_like(groups[0])


def prefix_cache_groups() -> tuple[list[Group], Group]:
    """The cached engines, each on its own model (the sliding-window variants' too), beside every
    uncached set on its own model: what differs is what caching reaches, not what a model does."""
    sets = app_sets(load_apps()["prefix-cache"], ModelFacts.of(zoo.model_dir(MODEL)))
    (uncached,) = [s for s in sets if s.name == UNCACHED]
    # The baselines first: a model's import-time lines land in the first group that loads it.
    ordered = sorted((s for s in sets if s.name != UNCACHED), key=lambda s: not s.name.startswith(UNCACHED))
    groups = [Group(f"oracle:{s.name}" if not s.name.startswith(UNCACHED) else f"baseline-{s.name}", s.engine_args,
                    s.requests, model=s.model) for s in ordered]
    return groups, Group("baseline", uncached.engine_args, uncached.requests)


def positions_groups() -> tuple[list[Group], Group]:
    """Every config variant on its own engine, beside the bundled model's own config on the same
    prompt cut to its context (1024): what the variants' position encodings and windows reach."""
    sets = app_sets(load_apps()["positions"], ModelFacts.of(zoo.model_dir(MODEL)))
    groups = [Group(f"oracle:{s.name}", s.engine_args, s.requests, model=s.model) for s in sets]
    first = sets[0].requests[0]
    return groups, Group("baseline", {"max_model_len": 1024}, [
        replace(first, id="baseline/p1000", prompt_token_ids=list(first.prompt_token_ids or [])[:1000])])


def greedy_like(like: Group) -> Group:
    """`like`'s requests, greedy without params or logprobs, in the same waves: the same batch
    shapes, so what differs is what the sampling params and logprobs reach."""
    return Group("baseline", {"max_logprobs": -1}, [
        Request(f"baseline/{i}", r.prompt, sampling={"max_tokens": r.sampling["max_tokens"], "temperature": 0.0,
                                                     "ignore_eos": True}, wave=r.wave)
        for i, r in enumerate(like.requests)])


def renamed(group: Group, name: str) -> Group:
    return Group(name, group.engine_args, [replace(r, id=f"{name}/{r.id}") for r in group.requests])


ORACLES = {"sampling": sampling_groups, "prefix-cache": prefix_cache_groups, "positions": positions_groups}


def reached(trace: dict[str, dict[str, list[int]]], root: Path) -> set[str]:
    """`vllm/<path>::<function>` of every function the oracle groups ran and the greedy ones did not."""
    def lines(prefix: str) -> dict[str, set[int]]:
        out: dict[str, set[int]] = {}
        for context, files in trace.items():
            if context.startswith(prefix):
                for file, ls in files.items():
                    out.setdefault(file, set()).update(ls)
        return out

    oracle, greedy = lines("oracle:"), lines("baseline")
    out = set()
    for file, ls in oracle.items():
        only = ls - greedy.get(file, set())
        if only:  # the tracer names engine files by their path under the import root ("vllm/...")
            path = Path(file) if Path(file).is_absolute() else root.parent / file
            rel = "vllm/" + str(path.resolve().relative_to(root.resolve()))
            out |= {f"{rel}::{name}" for name in functions_at(path.read_text(), only)}
    return out


@pytest.fixture(scope="module", params=sorted(ORACLES))
def reach(request, tmp_path_factory) -> tuple[str, set[str]]:
    groups, baseline = ORACLES[request.param]()
    root = vllm_root()
    job = Job("vllm", str(zoo.model_dir(MODEL)), "float32",
              [renamed(baseline, "baseline-first"), *groups, renamed(baseline, "baseline-last")], trace=[str(root)])
    out = tmp_path_factory.mktemp("reach")
    launch(job, installed_env(detect_device()), out, WORKER_TIMEOUT_S).raise_for_error()
    found = reached(json.loads((out / TRACE).read_text()), root)
    (out / "reach.txt").write_text("".join(f"{r}\n" for r in sorted(found)))  # the list, to update REACH from
    return request.param, found


EXPECTED_FILES = {
    "sampling": ("vllm/v1/sample/sampler.py", "vllm/v1/sample/ops/topk_topp_sampler.py",
                 "vllm/v1/sample/ops/penalties.py", "vllm/v1/sample/ops/bad_words.py",
                 "vllm/v1/sample/logits_processor/builtin.py", "vllm/model_executor/layers/utils.py"),
    "prefix-cache": ("vllm/v1/core/block_pool.py", "vllm/v1/core/kv_cache_utils.py",
                     "vllm/v1/core/single_type_kv_cache_manager.py"),
    "positions": ("vllm/model_executor/layers/rotary_embedding/yarn_scaling_rope.py",
                  "vllm/model_executor/layers/rotary_embedding/llama3_rope.py",
                  "vllm/model_executor/layers/rotary_embedding/phi3_long_rope_scaled_rope.py",
                  "vllm/model_executor/layers/rotary_embedding/linear_scaling_rope.py"),
}


def test_the_oracle_reaches_its_feature(reach):
    oracle, found = reach
    files = {r.split("::")[0] for r in found}
    for expected in EXPECTED_FILES[oracle]:
        assert expected in files, expected


def test_every_function_the_oracle_reaches_is_listed(reach):
    oracle, found = reach
    path = REACH / f"{oracle}.yaml"
    data = yaml.safe_load(path.read_text())
    listed = set(data["reached"]) | set(data.get("unrouted") or {})
    missing = sorted(found - listed)
    assert not missing, f"add to {path.name} (the run's reach.txt has the whole list; route their files to " \
        f"oracle/{oracle} in neighbours.yaml):\n" + "\n".join(missing)
