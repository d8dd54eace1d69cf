"""What the sampling oracle executes in the engine, and that the neighbour map sends it there.

A real vLLM-CPU worker runs a reduced oracle (every logprobs mode; the field, mixed and staggered
plans) between two plain greedy groups of the same batch shapes, under the worker's tracer
(coverage.py, one context per group).
The functions the oracle groups execute and the greedy groups do not are the code its parameters
reach; every one must be listed in suites/oracles/reach/sampling.yaml (whose files the unit test
tests/unit/test_neighbours.py checks against the map).
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
from infercheck.run.job import TRACE, Group, Job, Request
from infercheck.run.launcher import launch
from infercheck.build.engine_env import installed_env
from infercheck.device import detect_device
from tests.engine.conftest import WORKER_TIMEOUT_S

pytestmark = pytest.mark.engine

REACH = SUITES_DIR / "oracles" / "reach" / "sampling.yaml"
MODEL = "tiny-llama-add"


def vllm_root() -> Path:
    spec = importlib.util.find_spec("vllm")
    assert spec is not None and spec.submodule_search_locations
    return Path(list(spec.submodule_search_locations)[0])


def oracle_groups() -> list[Group]:
    oracle = load_apps()["sampling"]
    reduced = replace(oracle, workload={**oracle.workload, "plans": ["field", "mixed", "staggered"]})
    sets = app_sets(reduced, ModelFacts.of(zoo.model_dir(MODEL)))
    return [Group(f"oracle:{s.name}", s.engine_args, s.requests) for s in sets]


def greedy_group(name: str, like: Group) -> Group:
    """`like`'s requests, greedy without params or logprobs, in the same waves: the same batch
    shapes, so what differs is what the sampling params and logprobs reach."""
    return Group(name, {"max_logprobs": -1}, [
        Request(f"{name}/{i}", r.prompt, sampling={"max_tokens": r.sampling["max_tokens"], "temperature": 0.0,
                                                   "ignore_eos": True}, wave=r.wave)
        for i, r in enumerate(like.requests)])


def reached(trace: dict[str, dict[str, list[int]]], root: Path) -> set[str]:
    """`vllm/<path>::<function>` of every function the oracle groups ran and the greedy ones did not."""
    def lines(prefix: str) -> dict[str, set[int]]:
        out: dict[str, set[int]] = {}
        for context, files in trace.items():
            if context.startswith(prefix):
                for file, ls in files.items():
                    out.setdefault(file, set()).update(ls)
        return out

    oracle, greedy = lines("oracle:"), lines("greedy")
    out = set()
    for file, ls in oracle.items():
        only = ls - greedy.get(file, set())
        if only:
            rel = "vllm/" + str(Path(file).resolve().relative_to(root.resolve()))
            out |= {f"{rel}::{name}" for name in functions_at(Path(file).read_text(), only)}
    return out


@pytest.fixture(scope="module")
def reach(tmp_path_factory) -> set[str]:
    groups = oracle_groups()
    root = vllm_root()
    job = Job("vllm", str(zoo.model_dir(MODEL)), "float32",
              [greedy_group("greedy-first", groups[0]), *groups, greedy_group("greedy-last", groups[0])],
              trace=[str(root)])
    out = tmp_path_factory.mktemp("reach")
    launch(job, installed_env(detect_device()), out, WORKER_TIMEOUT_S).raise_for_error()
    found = reached(json.loads((out / TRACE).read_text()), root)
    (out / "reach.txt").write_text("".join(f"{r}\n" for r in sorted(found)))  # the list, to update REACH from
    return found


def test_the_oracle_reaches_the_sampling_path(reach):
    files = {r.split("::")[0] for r in reach}
    for expected in ("vllm/v1/sample/sampler.py", "vllm/v1/sample/ops/topk_topp_sampler.py",
                     "vllm/v1/sample/ops/penalties.py", "vllm/v1/sample/ops/bad_words.py",
                     "vllm/v1/sample/logits_processor/builtin.py", "vllm/model_executor/layers/utils.py"):
        assert expected in files, expected


def test_every_function_the_oracle_reaches_is_listed(reach):
    data = yaml.safe_load(REACH.read_text())
    listed = set(data["reached"]) | set(data["unrouted"])
    missing = sorted(reach - listed)
    assert not missing, f"add to {REACH.name} (the run's reach.txt has the whole list; route their files to oracle/sampling in neighbours.yaml):\n" + \
        "\n".join(missing)
