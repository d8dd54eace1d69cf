"""vLLM backend of the worker: one `LLM` per group, all its requests submitted together."""

from __future__ import annotations

import gc
import inspect
import time
from dataclasses import fields
from typing import Any, Callable

from infercheck.run.job import Group, GroupResult, Job, Request, RequestResult, WorkerInputError

# CPU needs an explicit KV-cache size (its memory check refuses to start otherwise).
CPU_KV_CACHE_BYTES = 256 * 1024 * 1024


def known_engine_args() -> set[str]:
    from vllm import LLM
    from vllm.engine.arg_utils import EngineArgs

    names = {f.name for f in fields(EngineArgs)}
    names |= set(inspect.signature(LLM.__init__).parameters) - {"self", "kwargs"}
    return names


def engine_kwargs(job: Job, group: Group) -> dict[str, Any]:
    """The group's engine args over the harness defaults; unknown names refused by name."""
    import torch

    unknown = sorted(set(group.engine_args) - known_engine_args())
    if unknown:
        raise WorkerInputError("bad_engine_arg", f"unknown engine arg(s) {', '.join(unknown)} "
                                                 f"(not a vllm EngineArgs field) in group {group.name}")
    kwargs: dict[str, Any] = {"dtype": job.dtype, "seed": job.seed, "enforce_eager": True,
                              "disable_log_stats": False}
    if not torch.cuda.is_available():
        kwargs["kv_cache_memory_bytes"] = CPU_KV_CACHE_BYTES
    kwargs.update(group.engine_args)
    return kwargs


def sampling_params(request: Request) -> Any:
    from vllm import SamplingParams

    params = dict(request.sampling)
    if "structured_outputs" in params:
        from vllm.sampling_params import StructuredOutputsParams

        params["structured_outputs"] = StructuredOutputsParams(**params["structured_outputs"])
    try:
        return SamplingParams(logprobs=request.logprobs, prompt_logprobs=request.prompt_logprobs, **params)
    except (TypeError, ValueError) as exc:
        raise WorkerInputError("bad_sampling_params", f"request {request.id}: {exc}") from None


def ranked(position: dict[int, Any] | None) -> list[list[float]] | None:
    """A position's logprobs as [[token_id, logprob], ...], best first."""
    if position is None:
        return None
    return [[int(tid), float(lp.logprob)] for tid, lp in sorted(position.items(), key=lambda kv: -kv[1].logprob)]


def engine_metrics(llm: Any) -> dict[str, float]:
    """Counters and gauges from the engine's metrics snapshot (e.g. prefix-cache hits)."""
    out: dict[str, float] = {}
    try:
        for metric in llm.get_metrics():
            value = getattr(metric, "value", None)
            if isinstance(value, (int, float)):
                out[metric.name] = out.get(metric.name, 0.0) + float(value)
    except Exception:  # metrics are evidence, never a reason to lose results
        pass
    return out


def pieces_of(completion: Any) -> dict[str, str]:
    """Decoded text of every token id mentioned in the output and its logprobs."""
    pieces: dict[str, str] = {}
    for position in completion.logprobs or []:
        for tid, lp in position.items():
            if lp.decoded_token is not None:
                pieces[str(tid)] = lp.decoded_token
    return pieces


def to_result(request: Request, group: str, output: Any, elapsed: float) -> RequestResult:
    completion = output.outputs[0]
    out_ids = list(completion.token_ids)
    logprobs = chosen = None
    if completion.logprobs is not None:
        logprobs = [ranked(p) for p in completion.logprobs]
        chosen = [float(p[t].logprob) for p, t in zip(completion.logprobs, out_ids)]
    prompt_lps = [ranked(p) for p in output.prompt_logprobs] if output.prompt_logprobs is not None else None
    return RequestResult(
        id=request.id, group=group, prompt_ids=list(output.prompt_token_ids), output_ids=out_ids,
        text=completion.text, finish_reason=completion.finish_reason, logprobs=logprobs, chosen_logprobs=chosen,
        prompt_logprobs=prompt_lps, elapsed_s=round(elapsed, 4), pieces=pieces_of(completion),
    )


def run_group(job: Job, group: Group, emit: Callable[[RequestResult], None],
              emit_samples: Callable[[list[dict[str, Any]]], None]) -> GroupResult:
    from vllm import LLM

    kwargs = engine_kwargs(job, group)
    params = [sampling_params(r) for r in group.requests]
    prompts = [{"prompt_token_ids": r.prompt_token_ids} if r.prompt_token_ids is not None else r.prompt
               for r in group.requests]
    t0 = time.time()
    llm = LLM(model=job.model, **kwargs)
    startup = time.time() - t0
    t1 = time.time()
    outputs = llm.generate(prompts, params, use_tqdm=False) if prompts else []
    elapsed = time.time() - t1
    prompt_tokens = output_tokens = 0
    for request, output in zip(group.requests, outputs):
        result = to_result(request, group.name, output, elapsed)
        prompt_tokens += len(result.prompt_ids)
        output_tokens += len(result.output_ids)
        emit(result)
    if group.lm_eval:
        from infercheck.run.lm_eval_runner import make_live_vllm, run_tasks

        emit_samples(run_tasks(make_live_vllm(llm), group.lm_eval, group.name))
    metrics = engine_metrics(llm)
    del llm
    gc.collect()
    return GroupResult(group.name, group.engine_args, len(group.requests), prompt_tokens, output_tokens,
                       round(elapsed, 4), round(startup, 3), metrics)
