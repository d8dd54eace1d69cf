"""HF transformers reference backend: greedy generation and teacher-forced scoring, full forward.

Each step re-runs the whole sequence (no KV cache) and the final logprobs come from one forward
over prompt + output: the simplest, most independent numerics for a reference.
"""

from __future__ import annotations

import functools
import time
from typing import Any

from infercheck.run.job import Group, GroupResult, Job, Request, RequestResult, Sink, WorkerInputError

SUPPORTED_SAMPLING = {"max_tokens", "temperature", "ignore_eos", "seed"}


def load_model(job: Job, group: Group) -> tuple[Any, Any]:
    return load_pretrained(group.model or job.model, job.dtype)


@functools.lru_cache(maxsize=2)  # a reference job has one group per engine group, mostly on one model
def load_pretrained(path: str, dtype_name: str) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = getattr(torch, dtype_name) if dtype_name != "auto" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation="eager")
    model.eval()
    return model, AutoTokenizer.from_pretrained(path)


def import_reference() -> None:
    """torch and transformers, imported ahead of the first model load (timed apart from it)."""
    import torch  # noqa: F401
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: F401


def check_sampling(request: Request) -> None:
    unsupported = sorted(set(request.sampling) - SUPPORTED_SAMPLING)
    if unsupported or float(request.sampling.get("temperature", 0.0)) != 0.0:
        raise WorkerInputError("bad_sampling_params", f"request {request.id}: the HF reference runs greedy "
                                                      f"decoding or scoring only (got {request.sampling})")


def top_k(row: Any, k: int, include: int | None) -> list[list[float]]:
    """The k best [token_id, logprob] pairs (k = -1: the full distribution), plus `include`."""
    import torch

    k = row.shape[-1] if k < 0 else min(k, row.shape[-1])
    values, ids = torch.topk(row, k)
    pairs = [[int(i), float(v)] for v, i in zip(values.tolist(), ids.tolist())]
    if include is not None and include not in ids.tolist():
        pairs.append([int(include), float(row[include])])
    return pairs


def with_candidates(pairs: list[list[float]], row: Any, candidates: list[int]) -> list[list[float]]:
    """Add the reference logprob of each candidate id (the engine's top-k) not already listed."""
    listed = {int(p[0]) for p in pairs}
    extra = [[int(c), float(row[c])] for c in candidates if int(c) not in listed]
    return sorted(pairs + extra, key=lambda p: -p[1])


def eos_ids(model: Any, tokenizer: Any) -> list[int]:
    """Every end-of-sequence id: the tokenizer's and the generation config's."""
    ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids |= {configured} if isinstance(configured, int) else set(configured or [])
    return sorted(ids)


def score(model: Any, request: Request, prompt_ids: list[int], eos_id: int | None,
          tokenizer: Any = None) -> RequestResult:
    import torch

    with torch.no_grad():
        if request.continuation_ids is not None:
            out_ids = list(request.continuation_ids)
        else:
            out_ids = []
            ignore_eos = bool(request.sampling.get("ignore_eos", False))
            for _ in range(int(request.sampling.get("max_tokens", 16))):
                logits = model(input_ids=torch.tensor([prompt_ids + out_ids])).logits[0, -1]
                nxt = int(torch.argmax(logits))
                out_ids.append(nxt)
                if nxt == eos_id and not ignore_eos:
                    break
        full = torch.tensor([prompt_ids + out_ids])
        logits = model(input_ids=full).logits[0].float()
        logprobs = torch.log_softmax(logits, dim=-1)
    n = len(prompt_ids)
    k = request.logprobs or 0  # -1: full distributions
    gen_rows = [logprobs[n - 1 + t] for t in range(len(out_ids))]
    chosen = [float(row[t]) for row, t in zip(gen_rows, out_ids)]
    result = RequestResult(id=request.id, group="", prompt_ids=prompt_ids, output_ids=out_ids, text="",
                           finish_reason="stop" if out_ids and out_ids[-1] == eos_id else "length",
                           chosen_logprobs=chosen)
    candidates = request.candidate_ids or [[] for _ in out_ids]
    if k or request.candidate_ids:
        result.logprobs = [with_candidates(top_k(row, k if k < 0 else max(k, 1), t), row, cands)
                           for row, t, cands in zip(gen_rows, out_ids, candidates)]
    if request.processors is not None:
        from infercheck.run.hf_processors import processed_rows

        raw = logits[n - 1:n - 1 + len(out_ids)]
        result.raw_logits = [[float(v) for v in row] for row in raw.tolist()]
        with torch.no_grad():
            result.processed_logits, result.borderline = processed_rows(
                raw, prompt_ids, out_ids, request.processors, tokenizer, eos_ids(model, tokenizer))
    if request.prompt_logprobs is not None:
        pk = request.prompt_logprobs if request.prompt_logprobs < 0 else max(1, request.prompt_logprobs)
        result.prompt_logprobs = [None] + [top_k(logprobs[i - 1], pk, prompt_ids[i]) for i in range(1, n)]
    return result


def run_group(job: Job, group: Group, sink: Sink) -> GroupResult:
    for request in group.requests:
        check_sampling(request)
    imports = time.time()
    import_reference()
    t0 = time.time()
    model, tokenizer = load_model(job, group)
    startup = time.time() - t0
    t1 = time.time()
    prompt_tokens = output_tokens = 0
    for request in group.requests:
        started = time.time()
        prompt_ids = list(request.prompt_token_ids) if request.prompt_token_ids is not None \
            else tokenizer(request.prompt).input_ids
        result = score(model, request, prompt_ids, tokenizer.eos_token_id, tokenizer)
        result.group = group.name
        result.text = tokenizer.decode(result.output_ids, skip_special_tokens=True)
        mentioned = set(result.output_ids) | {int(p[0]) for pos in result.logprobs or [] for p in pos}
        result.pieces = {str(t): tokenizer.decode([t]) for t in sorted(mentioned)}
        result.elapsed_s = round(time.time() - started, 4)
        prompt_tokens += len(prompt_ids)
        output_tokens += len(result.output_ids)
        sink.emit(result)
        sink.finished()
    elapsed = time.time() - t1
    from infercheck.run.lm_eval_runner import evaluate, make_hf

    evaluated = evaluate(lambda: make_hf(model, tokenizer), group, sink)
    return GroupResult(group.name, group.engine_args, len(group.requests), prompt_tokens, output_tokens,
                       round(elapsed, 4), round(startup, 3), import_s=round(t0 - imports + evaluated.import_s, 3),
                       lm_eval_s=round(evaluated.run_s, 3))
