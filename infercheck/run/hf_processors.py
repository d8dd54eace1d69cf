"""The sampling oracle's reference: a request's logits processing rebuilt from HF transformers' own
processors, applied to HF's logits of the engine's own sequence (docs/design.md, "Oracles";
the order and where it was read: docs/engine-notes.md, "Sampling order").

vLLM order: allowed_token_ids → bad_words → min_tokens → logit_bias → repetition, frequency and
presence penalties → [random rows only] temperature → min_p → top_k → top_p. HF has processors for
all but allowed_token_ids and the frequency/presence penalties; those two follow vLLM's documented
semantics (OpenAI's definition: subtract `frequency × count` and `presence × [count > 0]` over the
*output* tokens). The constructor's clamp is honoured: a temperature in (0, 0.01) runs at 0.01. A
logit bias is applied as given: the ±100 clip lives in `SamplingParams.from_optional` (the OpenAI
server's path), not in the constructor the offline API uses. Worker-side only (torch, transformers).
"""

from __future__ import annotations

from typing import Any, Callable

SAMPLING_EPS = 1e-5  # temperatures below this are greedy
MIN_TEMPERATURE = 0.01  # a smaller positive temperature is raised to this
BORDER = 1e-4  # relative slack on top_p / min_p thresholds: tokens this close to a cut are "borderline"

Step = Callable[[Any, Any], Any]  # (input_ids [1, L], scores [1, V]) -> scores


def bad_words_ids(words: list[str], tokenizer: Any) -> list[list[int]]:
    """Each bad word's token ids, bare and with a leading space where that is a different token
    sequence of the same length (vLLM's documented rule: the word is banned at the start of a text
    and inside it)."""
    out: list[list[int]] = []
    for word in words:
        bare = list(tokenizer.encode(word.lstrip(), add_special_tokens=False))
        out.append(bare)
        spaced = list(tokenizer.encode(" " + word.lstrip(), add_special_tokens=False))
        if spaced and spaced[0] != bare[0] and len(spaced) == len(bare):
            out.append(spaced)
    return out


def stop_ids(params: dict[str, Any], eos_ids: list[int]) -> list[int]:
    """The tokens min_tokens holds back: every eos id (even with ignore_eos) and stop_token_ids."""
    return sorted(set(eos_ids) | {int(t) for t in params.get("stop_token_ids") or []})


def temperature_of(params: dict[str, Any]) -> float:
    t = float(params.get("temperature", 1.0))
    return 0.0 if t < SAMPLING_EPS else max(t, MIN_TEMPERATURE)


def argmax_steps(params: dict[str, Any], prompt_len: int, tokenizer: Any, eos_ids: list[int]) -> list[Step]:
    """The steps every row gets (they can change a greedy choice), in vLLM's order."""
    import torch
    from transformers import (MinNewTokensLengthLogitsProcessor, NoBadWordsLogitsProcessor,
                              RepetitionPenaltyLogitsProcessor, SequenceBiasLogitsProcessor)

    steps: list[Step] = []
    if params.get("allowed_token_ids"):
        allowed = sorted({int(t) for t in params["allowed_token_ids"]})

        def only_allowed(ids: Any, scores: Any) -> Any:
            keep = torch.full_like(scores, float("-inf"))
            keep[:, allowed] = 0.0
            return scores + keep
        steps.append(only_allowed)
    if params.get("bad_words"):
        steps.append(NoBadWordsLogitsProcessor(bad_words_ids(list(params["bad_words"]), tokenizer)))
    if int(params.get("min_tokens") or 0) > 0:
        steps.append(MinNewTokensLengthLogitsProcessor(prompt_len, int(params["min_tokens"]),
                                                       stop_ids(params, eos_ids)))
    if params.get("logit_bias"):
        bias = [[[int(t)], float(b)] for t, b in params["logit_bias"].items()]
        steps.append(SequenceBiasLogitsProcessor(bias))
    if float(params.get("repetition_penalty", 1.0)) != 1.0:
        steps.append(RepetitionPenaltyLogitsProcessor(float(params["repetition_penalty"])))
    frequency, presence = float(params.get("frequency_penalty", 0.0)), float(params.get("presence_penalty", 0.0))
    if frequency or presence:
        def output_penalties(ids: Any, scores: Any) -> Any:
            counts = torch.zeros_like(scores)
            out = ids[:, prompt_len:]
            if out.numel():
                counts.scatter_add_(1, out, torch.ones_like(out, dtype=scores.dtype))
            return scores - frequency * counts - presence * (counts > 0).to(scores.dtype)
        steps.append(output_penalties)
    return steps


def random_steps(params: dict[str, Any], slack: float = 0.0) -> list[Step]:
    """Temperature and the warpers, for a random (temperature > 0) row; `slack` loosens (> 0) or
    tightens (< 0) the top_p and min_p thresholds, to find tokens at the edge of a cut."""
    from transformers import MinPLogitsWarper, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    temperature = temperature_of(params)
    if temperature == 0.0:
        return []
    steps: list[Step] = [TemperatureLogitsWarper(temperature)] if temperature != 1.0 else []
    min_p = float(params.get("min_p") or 0.0)
    if min_p > 0:
        steps.append(MinPLogitsWarper(min(1.0, max(0.0, min_p * (1 - slack)))))
    top_k = int(params.get("top_k") or 0)
    if top_k > 0:
        steps.append(TopKLogitsWarper(top_k))
    top_p = float(params.get("top_p", 1.0))
    if top_p < 1.0:
        steps.append(TopPLogitsWarper(min(1.0, max(1e-9, top_p * (1 + slack)))))
    return steps


def apply(steps: list[Step], ids: Any, scores: Any) -> Any:
    for step in steps:
        scores = step(ids, scores)
    return scores


def processed_rows(raw: Any, prompt_ids: list[int], out_ids: list[int], params: dict[str, Any], tokenizer: Any,
                   eos_ids: list[int]) -> tuple[list[list[float]], list[list[int]]]:
    """Per output position t: the processed logits over the whole vocabulary (masked = -inf) for the
    context prompt + out[:t], and the borderline tokens (masked under a slightly tighter or looser
    top_p / min_p but not both). `raw`: [len(out), V] float32 logits at those positions."""
    import torch

    fixed = argmax_steps(params, len(prompt_ids), tokenizer, eos_ids)
    rows, borders = [], []
    for t in range(len(out_ids)):
        ids = torch.tensor([prompt_ids + out_ids[:t]])
        scores = apply(fixed, ids, raw[t:t + 1].clone())
        processed = apply(random_steps(params), ids, scores.clone())
        loose = torch.isfinite(apply(random_steps(params, BORDER), ids, scores.clone()))
        tight = torch.isfinite(apply(random_steps(params, -BORDER), ids, scores.clone()))
        rows.append([float(v) for v in processed[0].tolist()])
        borders.append([int(i) for i in (loose ^ tight)[0].nonzero().flatten().tolist()])
    return rows, borders
