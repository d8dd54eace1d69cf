"""The model zoo: specs of the bundled tiny models, their deterministic build and manifests.

`infercheck models build` trains each model (fixed seeds), measures its held-out accuracy with HF
transformers, and writes an HF-format folder under suites/models/<name>/ with a manifest.
"""

from __future__ import annotations

import hashlib
import json
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from infercheck.errors import InfercheckError
from infercheck.hub import cached_on_disk, hub_reachable
from infercheck.models import addition
from infercheck.models.tokenizer import BOS_ID, EOS_ID, PAD_ID, save_tokenizer, vocab_size
from infercheck.models.train import TrainConfig, encode, save_model, train_causal_lm
from infercheck.paths import DATA_DIR, MODELS_DIR

MANIFEST = "manifest.json"
ADDITION_DATA = DATA_DIR / "addition"
MANY_SHOT_MIN_CHARS = 420  # many-shot prompts: 400+ tokens (one token per character)


@dataclass(frozen=True)
class ModelSpec:
    name: str
    architecture: str  # "llama" | "mistral"
    description: str
    config: dict[str, Any]
    train: TrainConfig
    extra: dict[str, Any] = field(default_factory=dict)


COMMON = dict(
    hidden_size=128, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, head_dim=64, max_position_embeddings=1024, rms_norm_eps=1e-5,
    rope_theta=10000.0, tie_word_embeddings=False, pad_token_id=PAD_ID, bos_token_id=BOS_ID,
    eos_token_id=EOS_ID,
)

SPECS: dict[str, ModelSpec] = {
    "tiny-llama-add": ModelSpec(
        name="tiny-llama-add",
        architecture="llama",
        description="Llama, 2 layers, 4 query / 2 KV heads of dim 64, char tokenizer, trained on packed 2-digit addition (769 tokens).",
        config=dict(COMMON),
        train=TrainConfig(steps=2400, pattern=((8, 768), (8, 768), (64, 40)), lr=4e-3, seed=0),
    ),
    "tiny-sliding": ModelSpec(
        name="tiny-sliding",
        architecture="mistral",
        description="Mistral, sliding_window 32, 4 query / 2 KV heads of dim 64, char tokenizer, trained on packed addition (257 tokens: with a 32-token window and relative rotary, longer sequences add nothing).",
        config=dict(COMMON, sliding_window=32),
        train=TrainConfig(steps=900, pattern=((16, 256), (16, 256), (64, 40)), lr=4e-3, seed=1),
    ),
}


DEFAULT_DTYPE = "float32"  # a run's dtype on a model that names no other (RandomSpec.dtype)


@dataclass(frozen=True)
class RandomSpec:
    """A bundled model with random weights: an architecture of models/random_build.py, its seed,
    and the dtype it runs in (its weights' dtype, random_build.ARCHITECTURES's `dtype`)."""
    name: str
    architecture: str
    seed: int
    dtype: str = DEFAULT_DTYPE  # a run's dtype when --dtype is not given
    dtype_only: str = ""  # why no other --dtype runs it ("": any does)


# State-space and hybrid models (docs/design.md, "State-space and hybrid models"): random weights and
# the general-text tokenizer, so the model-agnostic suites judge them; nothing to learn for parity.
# tiny-mamba2: Mamba2 layers only, their state carried between prefill chunks; tiny-hybrid: a hybrid
# KV cache, a Mamba2 layer's state beside a full-attention layer's paged KV; tiny-gdn: the same with
# a gated delta-net (linear attention) layer, in bfloat16, the only dtype vLLM-CPU runs it in.
RANDOM_SPECS: dict[str, RandomSpec] = {
    "tiny-mamba2": RandomSpec("tiny-mamba2", "mamba2", 0),
    "tiny-hybrid": RandomSpec("tiny-hybrid", "granitemoehybrid", 0),
    "tiny-gdn": RandomSpec("tiny-gdn", "qwen3_next", 0, "bfloat16",
                           "vLLM-CPU's gated delta-net attention requires bfloat16"),
}


def bundled_names() -> list[str]:
    """Every bundled model: the trained addition models, then the random-weight ones."""
    return [*SPECS, *RANDOM_SPECS]


def model_dir(name_or_path: str) -> Path:
    """Resolve a zoo name or a folder path; one clear error when neither exists."""
    if name_or_path in bundled_names():
        path = MODELS_DIR / name_or_path
    else:
        path = Path(name_or_path).expanduser()
    if not (path / "config.json").is_file():
        looks_like_hub_id = name_or_path.count("/") == 1 and not path.exists()
        if looks_like_hub_id and (hub_reachable() or cached_on_disk(name_or_path, "models")):
            return Path(name_or_path)  # a hub id: the workers download it, or read the local copy offline
        known = ", ".join(bundled_names())
        hint = (" — it looks like a hub id, but the Hugging Face hub is not reachable (offline) and the local hub "
                "cache has no copy of it") if looks_like_hub_id else ""
        raise InfercheckError(f"model not found: {name_or_path} (no config.json there; bundled models: {known}){hint}")
    return path.resolve()


def bundled_name(name_or_path: str) -> str | None:
    """The zoo name `--model` names, by name or by its folder under suites/models/; None otherwise."""
    if name_or_path in bundled_names():
        return name_or_path
    path = Path(name_or_path).expanduser()
    return path.name if path.name in bundled_names() and path.resolve() == (MODELS_DIR / path.name).resolve() else None


def model_dtype(name_or_path: str) -> str:
    """The dtype a bundled model runs in by default: a random-weight one's own, else float32."""
    spec = RANDOM_SPECS.get(bundled_name(name_or_path) or "")
    return spec.dtype if spec else DEFAULT_DTYPE


def run_dtype(name_or_path: str, given: str | None) -> str:
    """A run's dtype: --dtype when given, else the model's (model_dtype). A bundled model that runs
    in one dtype only refuses another in one line, before anything starts."""
    if given is None:
        return model_dtype(name_or_path)
    spec = RANDOM_SPECS.get(bundled_name(name_or_path) or "")
    if spec is not None and spec.dtype_only and given != spec.dtype:
        raise InfercheckError(f"{spec.name} runs only in {spec.dtype} ({spec.dtype_only}): drop --dtype {given}")
    return given


def carries_general_text(model_name: str) -> bool:
    """Can the model's tokenizer carry general text (capitals, any ASCII punctuation)? The trained
    bundled models' character vocabulary (models/tokenizer.py) cannot; the random-weight ones have
    a byte-level BPE, and any other model is taken to have a general tokenizer (every released LLM
    tokenizer covers printable ASCII)."""
    return model_name not in SPECS


def trained_on_addition(model_name: str) -> bool:
    """Accuracy on the addition sets means something for the bundled models only (their task)."""
    return model_name in SPECS


def file_digests(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file() and p.name != MANIFEST
    }


def read_manifest(folder: Path) -> dict[str, Any] | None:
    path = folder / MANIFEST
    return json.loads(path.read_text()) if path.is_file() else None


def verify(name: str) -> tuple[bool, str]:
    """Is the bundled model present and do its files match the manifest digests?"""
    folder = MODELS_DIR / name
    manifest = read_manifest(folder)
    if manifest is None:
        return False, "missing (run `infercheck models build`)"
    if file_digests(folder) != manifest["files"]:
        return False, "files differ from manifest digests"
    if not manifest.get("trained", True):
        return True, f"ok, random weights (seed {manifest.get('seed')})"
    acc = manifest.get("accuracy", {})
    return True, "ok, " + ", ".join(f"{k} {v:.3f}" for k, v in acc.items())


def _make_model(spec: ModelSpec) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM

    torch.manual_seed(spec.train.seed)
    classes = {"llama": (LlamaConfig, LlamaForCausalLM), "mistral": (MistralConfig, MistralForCausalLM)}
    config_cls, model_cls = classes[spec.architecture]
    config = config_cls(vocab_size=vocab_size(), **spec.config)
    config._attn_implementation = "sdpa"  # training speed; the reference worker picks its own
    return model_cls(config)


def greedy_accuracy(model: Any, prompts: list[str], answers: list[str]) -> float:
    """Greedy exact match of the text before the first newline (HF, float32)."""
    import torch

    correct = 0
    with torch.no_grad():
        for prompt, answer in zip(prompts, answers):
            ids = torch.tensor([encode(prompt)])
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=4,
                                 do_sample=False, pad_token_id=PAD_ID)
            text = "".join(addition_decode(out[0, ids.shape[1]:].tolist()))
            correct += text.split("\n")[0] == answer
    return correct / len(prompts)


def addition_decode(ids: list[int]) -> list[str]:
    from infercheck.models.tokenizer import VOCAB

    return [VOCAB[i] for i in ids]


def evaluation_prompts(many_shot: bool, limit: int | None = None) -> tuple[list[str], list[str]]:
    """Held-out prompts and answers: zero-shot, or many-shot (400+ tokens of solved examples)."""
    test = addition.load_split(ADDITION_DATA / "test.jsonl")[:limit]
    fewshot = addition.load_split(ADDITION_DATA / "fewshot.jsonl")
    prompts = []
    for i, ex in enumerate(test):
        if many_shot:
            shots = addition.shots_for_length(fewshot, MANY_SHOT_MIN_CHARS, offset=i * 7)
            prompts.append(addition.many_shot_prompt(shots, ex))
        else:
            prompts.append(ex.question)
    return prompts, [ex.answer for ex in test]


def build(name: str, force: bool = False, log: Callable[[str], None] = print) -> Path:
    """Train and write one bundled model; skipped when present and matching its manifest."""
    spec = SPECS[name]
    folder = MODELS_DIR / name
    if not force and verify(name)[0]:
        log(f"{name}: up to date")
        return folder
    addition.write_splits(ADDITION_DATA)
    train = addition.load_split(ADDITION_DATA / "train.jsonl")
    log(f"{name}: training {spec.architecture} ({spec.train.steps} steps)")
    model = _make_model(spec)
    stats = train_causal_lm(model, train, spec.train, log=log)
    zero_p, zero_a = evaluation_prompts(many_shot=False)
    many_p, many_a = evaluation_prompts(many_shot=True, limit=100)
    accuracy = {
        "zero_shot": greedy_accuracy(model, zero_p, zero_a),
        "many_shot": greedy_accuracy(model, many_p, many_a),
    }
    log(f"{name}: held-out accuracy {accuracy}")
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        old.unlink()
    save_model(model, folder)
    save_tokenizer(folder, model_max_length=spec.config["max_position_embeddings"])
    manifest = {
        "name": name,
        "description": spec.description,
        "trained": True,
        "build_command": f"infercheck models build {name} --force",
        "train": {"steps": spec.train.steps, "pattern": spec.train.pattern, "lr": spec.train.lr, "seed": spec.train.seed, **stats},
        "accuracy": accuracy,
        "accuracy_note": "HF float32 greedy exact match; zero_shot on 500 held-out pairs, many_shot on 100 (400+ token prompts)",
        "torch_threads": spec.train.threads,
        "platform": platform.machine(),
        "files": file_digests(folder),
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return folder
