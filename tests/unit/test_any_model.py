"""Any model (docs/design.md, "Any model"): the general-text prompt set, which suites a model that is
not bundled gets, the symptoms that cannot judge it, and the locally built random model."""

from __future__ import annotations

import json
import string
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from infercheck.draw import Draw
from infercheck.errors import InfercheckError
from infercheck.intake import check_symptom_fits
from infercheck.models.general_text import general_passages
from infercheck.prompts import build_prompts
from infercheck.suites import load_symptom, select_suites, suites_for_model

ROOT = Path(__file__).resolve().parents[2]
FOREIGN = "tiny-qwen2"  # any name outside the zoo
SPEC = {"set": "general-text", "count": 6, "min_chars": 300, "max_chars": 2500}


def test_the_corpus_is_printable_ascii_any_tokenizer_carries():
    passages = general_passages()
    allowed = set(string.printable) - set("\t\r\x0b\x0c")
    assert len(passages) >= 50 and all(set(p) <= allowed for p in passages)


def test_general_text_prompts_spread_over_the_asked_lengths_and_follow_the_draw():
    prompts = build_prompts(SPEC, Draw(7))
    lengths = [len(p.text) for p in prompts]
    assert all(150 < n <= 2500 for n in lengths) and lengths == sorted(lengths), lengths
    assert lengths[-1] > 2000  # passages are joined to reach the long end
    assert [p.text for p in build_prompts(SPEC, Draw(7))] == [p.text for p in prompts]
    assert [p.text for p in build_prompts(SPEC, Draw(8))] != [p.text for p in prompts]
    assert len({p.id for p in prompts}) == len(prompts) and all(p.answer is None for p in prompts)


def test_a_model_outside_the_zoo_gets_general_text_parity_and_no_addition_accuracy():
    names = {s.name for s in select_suites(FOREIGN, None)}
    assert "parity/general-text" in names
    assert not any(n.startswith("accuracy/addition") or n.startswith("parity/addition") for n in names)
    assert {s.name for s in select_suites(FOREIGN, ["parity"])} == {"parity/general-text"}


def test_a_bundled_model_keeps_its_suites_and_cannot_carry_general_text():
    assert "parity/general-text" not in {s.name for s in select_suites("tiny-llama-add", None)}
    assert {s.name for s in select_suites("tiny-llama-add", ["parity"])} == {"parity/addition-long",
                                                                            "parity/addition-short"}
    with pytest.raises(InfercheckError, match="character vocabulary cannot carry"):
        select_suites("tiny-llama-add", ["general-text"])


def test_a_cases_suites_for_another_model_drop_the_case_models_accuracy():
    names = ["parity", "accuracy/addition-zero-shot", "accuracy/addition-many-shot"]
    assert suites_for_model(names, FOREIGN) == ["parity"]
    assert suites_for_model(names, "tiny-sliding") == names


def symptom(tmp_path: Path, body: dict) -> Path:
    path = tmp_path / "symptom.yaml"
    path.write_text(yaml.safe_dump({"description": "d", **body}))
    return path


def test_symptoms_that_cannot_judge_the_model_are_refused(tmp_path):
    accuracy = load_symptom(symptom(tmp_path, {"prompts": {"set": "addition-many-shot", "count": 4},
                                               "criterion": {"type": "accuracy", "min": 0.9}}))
    check_symptom_fits(accuracy, "tiny-llama-add")
    with pytest.raises(InfercheckError, match="judges the bundled models only"):
        check_symptom_fits(accuracy, FOREIGN)
    general = load_symptom(symptom(tmp_path, {"prompts": SPEC, "criterion": {"type": "parity"}}))
    check_symptom_fits(general, FOREIGN)
    with pytest.raises(InfercheckError, match="cannot carry"):
        check_symptom_fits(general, "tiny-sliding")


def build(out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "infercheck.cli", "models", "random", *args, "--out", str(out)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)


def test_the_random_model_is_deterministic_and_its_tokenizer_carries_the_corpus(tmp_path):
    from transformers import AutoTokenizer

    first, second = build(tmp_path / "a", "qwen2"), build(tmp_path / "b", "qwen2")
    assert first.returncode == 0 and second.returncode == 0, first.stderr[-2000:]
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["files"] == json.loads((tmp_path / "b" / "manifest.json").read_text())["files"]
    config = json.loads((tmp_path / "a" / "config.json").read_text())
    assert config["architectures"] == ["Qwen2ForCausalLM"] and not manifest["trained"]
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "a")
    assert len(tokenizer) <= config["vocab_size"]
    for text in general_passages()[:10]:
        assert tokenizer.decode(tokenizer.encode(text)) == text
    assert len(tokenizer.encode("07+45=052\n")) == 10  # digits one by one: apps' lengths hold


@pytest.mark.parametrize("args,message", [(("llama9",), "unknown architecture 'llama9'"),
                                          (("qwen2",), "not empty")])
def test_bad_random_model_requests_are_one_line_errors(tmp_path, args, message):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "keep.txt").write_text("mine")
    proc = build(tmp_path / "m", *args)
    assert proc.returncode != 0 and message in proc.stderr and "Traceback" not in proc.stderr
    assert (tmp_path / "m" / "keep.txt").read_text() == "mine"


def snapshot(cache: Path, kind: str, repo: str) -> None:
    folder = cache / f"{kind}--{repo.replace('/', '--')}" / "snapshots" / "abc123"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")


def test_offline_a_local_copy_of_a_hub_model_or_a_standard_tasks_dataset_is_enough(tmp_path, monkeypatch):
    from infercheck.models import zoo

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(InfercheckError, match="local hub cache has no copy"):
        zoo.model_dir("org/some-model")
    with pytest.raises(InfercheckError, match="accuracy/arc_easy: standard lm-eval"):
        select_suites(FOREIGN, ["arc_easy"])
    snapshot(tmp_path, "models", "org/some-model")
    snapshot(tmp_path, "datasets", "allenai/ai2_arc")
    assert zoo.model_dir("org/some-model") == Path("org/some-model")
    assert [s.name for s in select_suites(FOREIGN, ["arc_easy"])] == ["accuracy/arc_easy"]
