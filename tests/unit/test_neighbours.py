import pytest

from infercheck.neighbours import glob_regex, select_neighbours
from infercheck.suites import load_suites


@pytest.mark.parametrize("glob,path,hit", [
    ("vllm/v1/sample/*", "vllm/v1/sample/sampler.py", True),
    ("vllm/v1/sample/*", "vllm/v1/sample/ops/topk_topp_sampler.py", False),
    ("vllm/v1/sample/**", "vllm/v1/sample/ops/topk_topp_sampler.py", True),
    ("vllm/v1/core/kv_cache_*.py", "vllm/v1/core/kv_cache_utils.py", True),
    ("vllm/v1/core/kv_cache_*.py", "vllm/v1/core/block_pool.py", False),
])
def test_glob(glob, path, hit):
    assert bool(glob_regex(glob).match(path)) is hit


def test_sampler_patch_lists_sampling_apps_first():
    selected = select_neighbours(["vllm/v1/sample/ops/topk_topp_sampler.py"])
    apps = [s.name for s in selected if s.kind == "app"]
    assert set(apps) == {"sampler-distribution", "seeded-determinism", "logprobs", "structured-output", "stop-and-n"}
    assert [s.name for s in selected if s.kind == "oracle"] == ["sampling"]
    assert selected[0].kind == "app" and selected[-1].reasons[0].startswith("smoke")


def test_rotary_patch_selects_long_position_suites_with_reasons():
    selected = {s.name: s for s in select_neighbours(["vllm/model_executor/layers/rotary_embedding/base.py"])}
    assert "parity/addition-long" in selected and "accuracy/addition-many-shot" in selected
    assert selected["parity/addition-long"].files == ["vllm/model_executor/layers/rotary_embedding/base.py"]
    assert "rotary" in selected["parity/addition-long"].reasons[0]


def test_docs_only_patch_gets_just_the_smoke_set():
    selected = select_neighbours(["docs/usage.md"])
    assert {s.name for s in selected} == {"parity/addition-short", "accuracy/addition-zero-shot"}


def test_every_suite_named_in_the_map_exists():
    import yaml

    from infercheck.paths import SUITES_DIR

    data = yaml.safe_load((SUITES_DIR / "neighbours.yaml").read_text())
    named = set(data["smoke"]["suites"]) | {s for r in data["rules"] for s in r.get("suites") or []}
    assert named <= set(load_suites())


def test_every_app_named_in_the_map_exists_and_every_app_is_reachable():
    import yaml

    from infercheck.apps import load_apps
    from infercheck.paths import SUITES_DIR

    data = yaml.safe_load((SUITES_DIR / "neighbours.yaml").read_text())
    named = {a for r in data["rules"] for a in r.get("apps") or []}
    oracles = {a for r in data["rules"] for a in r.get("oracles") or []}
    known = load_apps()
    assert named | oracles == set(known)
    assert {known[n].kind for n in named} == {"app"} and {known[n].kind for n in oracles} == {"oracle"}


def test_choose_apps_from_touched_files_with_reasons():
    from infercheck.neighbours import choose_apps

    apps, reasons = choose_apps(["vllm/v1/sample/sampler.py"], None)
    assert [a.name for a in apps][:1] and {a.name for a in apps} >= {"sampler-distribution", "logprobs"}
    assert "vllm/v1/sample/sampler.py" in reasons["sampler-distribution"]
    assert apps[[a.name for a in apps].index("sampling")].check_name == "oracle/sampling"
    assert choose_apps(["vllm/v1/sample/sampler.py"], ["none"]) == ([], {})
    named, why = choose_apps([], ["preemption,logprobs"])
    assert [a.name for a in named] == ["preemption", "logprobs"] and why["logprobs"] == "named with --apps"


def test_choose_apps_refuses_unknown_names():
    from infercheck.errors import InfercheckError
    from infercheck.neighbours import choose_apps

    with pytest.raises(InfercheckError, match="unknown app"):
        choose_apps([], ["no-such-app"])
