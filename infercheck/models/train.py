"""Deterministic training of the tiny models on packed addition sequences (torch, CPU)."""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from infercheck.models.addition import Example, packed_sequence
from infercheck.models.tokenizer import BOS_ID, VOCAB


@dataclass(frozen=True)
class TrainConfig:
    """`steps` optimizer steps; step i uses batch shape `pattern[i % len(pattern)]` =
    (batch_size, seq_len). Long sequences teach every position the apps reach; short ones put
    many examples right after <s>, the zero-shot case. One cosine schedule spans all steps."""

    steps: int
    pattern: tuple[tuple[int, int], ...]
    lr: float
    seed: int
    warmup: int = 50
    threads: int = 2

    def shape_at(self, step: int) -> tuple[int, int]:
        return self.pattern[step % len(self.pattern)]


QUESTION_LOSS_WEIGHT = 0.1  # the operands are random: the answer digits carry the signal


def encode(text: str) -> list[int]:
    """<s> then one id per character (what the saved tokenizer produces)."""
    index = {tok: i for i, tok in enumerate(VOCAB)}
    return [BOS_ID] + [index[ch] for ch in text]


def answer_weights(text: str) -> list[float]:
    """Per-target loss weights: 1 for answer characters (after '=' through the newline), else small."""
    weights, in_answer = [], False
    for ch in text:
        weights.append(1.0 if in_answer else QUESTION_LOSS_WEIGHT)
        if ch == "=":
            in_answer = True
        elif ch == "\n":
            in_answer = False
    return weights


def train_causal_lm(model: Any, train: list[Example], cfg: TrainConfig,
                    log: Callable[[str], None] = print) -> dict[str, float]:
    """Train `model` in place; returns the final loss and wall time."""
    import torch

    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    rng = random.Random(cfg.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.98), weight_decay=0.01)

    def lr_at(step: int) -> float:
        if step < cfg.warmup:
            return cfg.lr * (step + 1) / cfg.warmup
        progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
        return cfg.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress)))

    model.train()
    start = time.time()
    loss_value = float("nan")
    for step in range(cfg.steps):
        batch_size, seq_len = cfg.shape_at(step)
        texts = [packed_sequence(rng, train, seq_len) for _ in range(batch_size)]
        ids = torch.tensor([encode(t) for t in texts], dtype=torch.long)
        # target i is text[i] (ids are shifted by the leading <s>)
        weights = torch.tensor([answer_weights(t) for t in texts])
        logits = model(input_ids=ids[:, :-1]).logits
        per_token = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                      ids[:, 1:].reshape(-1), reduction="none")
        loss = (per_token * weights.reshape(-1)).sum() / weights.sum()
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss_value = float(loss.detach())
        if step % 50 == 0 or step == cfg.steps - 1:
            log(f"  step {step:4d}/{cfg.steps} loss {loss_value:.4f} ({time.time() - start:.0f}s)")
    model.eval()
    return {"final_loss": loss_value, "train_seconds": round(time.time() - start, 1)}


def save_model(model: Any, out_dir: Path) -> None:
    """Save weights (safetensors, float32) and config in HF format."""
    model.save_pretrained(str(out_dir), safe_serialization=True)
