"""vLLM backend of the worker: one `LLM` per group, all its requests submitted together."""

from __future__ import annotations

import gc
import inspect
import time
from dataclasses import fields
from typing import Any

from infercheck.run.job import Group, GroupResult, Job, Request, RequestResult, Sink, WorkerInputError
from infercheck.run.progress import reporting_tqdm

# CPU needs an explicit KV-cache size (its memory check refuses to start otherwise).
CPU_KV_CACHE_BYTES = 256 * 1024 * 1024


# Layer kinds that carry a recurrent state (Mamba, linear attention) in a model's config.
RECURRENT_LAYER_KINDS = ("mamba", "linear_attention")
RECURRENT_MODEL_TYPES = ("mamba", "mamba2", "falcon_mamba")


def carries_recurrent_state(config: dict[str, Any]) -> bool:
    """A state-space or hybrid model, read from its HF config: a Mamba model type, or Mamba /
    linear-attention entries in its per-layer kinds (`layer_types`, `layers_block_type`)."""
    if config.get("model_type") in RECURRENT_MODEL_TYPES:
        return True
    kinds = [*(config.get("layer_types") or []), *(config.get("layers_block_type") or [])]
    return any(str(k).startswith(RECURRENT_LAYER_KINDS) for k in kinds)


def model_config(model: str) -> dict[str, Any]:
    """The model's config.json as a dict (a folder or a hub id; {} where it cannot be read)."""
    try:
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(model).to_dict()
    except Exception:  # the engine itself reports an unreadable model, with its own error
        return {}


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
        if "enable_prefix_caching" not in group.engine_args and carries_recurrent_state(
                model_config(group.model or job.model)):
            # vLLM turns prefix caching on by default for hybrid models (Mamba "align" mode), which the
            # CPU build cannot run (docs/engine-notes.md, "State-space and hybrid models"); apps that
            # test it ask for it by name, and a crash there is reported as this build's limitation.
            kwargs["enable_prefix_caching"] = False
    kwargs.update(group.engine_args)
    return kwargs


def sampling_params(request: Request) -> Any:
    from vllm import SamplingParams

    params = dict(request.sampling)
    if params.get("logit_bias"):  # token ids are JSON object keys in the job file: strings again here
        params["logit_bias"] = {int(t): float(b) for t, b in params["logit_bias"].items()}
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


def completion_record(completion: Any) -> dict[str, Any]:
    return {"ids": list(completion.token_ids), "text": completion.text, "finish_reason": completion.finish_reason,
            "stop_reason": completion.stop_reason if isinstance(completion.stop_reason, (str, int)) else None}


def to_result(request: Request, group: str, output: Any, elapsed: float, result_id: str | None = None) -> RequestResult:
    completion = output.outputs[0]
    out_ids = list(completion.token_ids)
    logprobs = chosen = None
    if completion.logprobs is not None:
        logprobs = [ranked(p) for p in completion.logprobs]
        chosen = [float(p[t].logprob) for p, t in zip(completion.logprobs, out_ids)]
    prompt_lps = [ranked(p) for p in output.prompt_logprobs] if output.prompt_logprobs is not None else None
    return RequestResult(
        id=result_id or request.id, group=group, prompt_ids=list(output.prompt_token_ids), output_ids=out_ids,
        text=completion.text, finish_reason=completion.finish_reason, logprobs=logprobs, chosen_logprobs=chosen,
        prompt_logprobs=prompt_lps, elapsed_s=round(elapsed, 4), pieces=pieces_of(completion),
        completions=[completion_record(c) for c in output.outputs] if len(output.outputs) > 1 else None,
        wave=request.wave, num_cached_tokens=getattr(output, "num_cached_tokens", None),
        cache_salt=request.cache_salt,
    )


def prompt_of(request: Request) -> Any:
    """The engine's prompt: text, or a tokens dict; a salted request always a dict."""
    if request.prompt_token_ids is None and request.cache_salt is None:
        return request.prompt
    prompt: dict[str, Any] = ({"prompt_token_ids": request.prompt_token_ids} if request.prompt_token_ids is not None
                              else {"prompt": request.prompt})
    if request.cache_salt is not None:
        prompt["cache_salt"] = request.cache_salt
    return prompt


class KVCacheTooSmall(RuntimeError):
    """A request needs more KV-cache blocks than the engine has: it would wait forever."""


def kv_blocks(llm: Any) -> tuple[int, int] | None:
    """(number of KV-cache blocks, tokens per block) as the engine sized them, when it says."""
    try:
        cfg = llm.llm_engine.vllm_config.cache_config
        return (int(cfg.num_gpu_blocks), int(cfg.block_size)) if cfg.num_gpu_blocks else None
    except Exception:  # an engine without these attributes: no check, never a failure
        return None


def check_fits(blocks: tuple[int, int] | None, request: Request, prompt_len: int) -> None:
    if blocks is None:
        return
    num_blocks, block_size = blocks
    need = prompt_len + int(request.sampling.get("max_tokens", 16))
    if -(-need // block_size) > num_blocks:
        raise KVCacheTooSmall(f"KV cache exhausted: the engine has {num_blocks} blocks of {block_size} tokens "
                              f"({num_blocks * block_size} tokens); request {request.id} needs {need} "
                              f"(prompt {prompt_len} + max_tokens) and would never be scheduled")


class GroupRunner:
    """Runs one group's waves on a live engine, emitting results and one timing row per generate call."""

    def __init__(self, llm: Any, group: Group, sink: Sink) -> None:
        self.llm, self.group, self.emit = llm, group, sink.emit
        self.progress_bar = reporting_tqdm(sink.finished)
        self.steps: list[dict[str, Any]] = []
        self.blocks = kv_blocks(llm)

    def generate(self, requests: list[Request], prompts: list[Any], wave: int, step: int) -> list[Any]:
        t0 = time.time()
        outputs = self.llm.generate(prompts, [sampling_params(r) for r in requests], use_tqdm=self.progress_bar)
        return self.timed(outputs, time.time() - t0, wave, step)

    def timed(self, outputs: list[Any], elapsed: float, wave: int, step: int) -> list[Any]:
        """Records one timing row for a call's outputs; pairs each output with the call's time."""
        self.steps.append({"wave": wave, "step": step, "requests": len(outputs),
                           "prompt_tokens": sum(len(o.prompt_token_ids) for o in outputs),
                           "output_tokens": sum(len(c.token_ids) for o in outputs for c in o.outputs),
                           "elapsed_s": round(elapsed, 4)})
        return [(o, elapsed) for o in outputs]

    def stepped(self, requests: list[Request], prompts: list[Any], wave: int) -> list[Any]:
        """`generate`, with each request added to the running engine at its `join_step` (engine steps
        since the wave began; an idle engine skips ahead to the next joiner), as a server adds
        arrivals between steps. Outputs in request order."""
        from vllm.sampling_params import RequestOutputKind

        engine, t0, step, done = self.llm.llm_engine, time.time(), 0, {}
        order = sorted(range(len(requests)), key=lambda i: requests[i].join_step)
        bar = self.progress_bar(total=len(requests))
        while order or engine.has_unfinished_requests():
            if not engine.has_unfinished_requests():
                step = max(step, requests[order[0]].join_step)
            while order and requests[order[0]].join_step <= step:
                i = order.pop(0)
                params = sampling_params(requests[i])
                params.output_kind = RequestOutputKind.FINAL_ONLY
                engine.add_request(str(i), prompts[i], params)
            for output in engine.step():
                if output.finished:
                    done[int(output.request_id)] = output
                    bar.update(1)
            step += 1
        bar.close()
        return self.timed([done[i] for i in range(len(requests))], time.time() - t0, wave, 0)

    def run_plain(self, requests: list[Request], wave: int) -> None:
        prompts = [prompt_of(r) for r in requests]
        if self.blocks is not None:
            tokenizer = self.llm.get_tokenizer()
            for r in requests:
                check_fits(self.blocks, r, len(r.prompt_token_ids) if r.prompt_token_ids is not None
                           else len(tokenizer.encode(r.prompt)))
        joining = any(r.join_step for r in requests)
        outputs = self.stepped(requests, prompts, wave) if joining else self.generate(requests, prompts, wave, 0)
        for request, (output, elapsed) in zip(requests, outputs):
            self.emit(to_result(request, self.group.name, output, elapsed))

    def run_sessions(self, sessions: list[Request], wave: int) -> None:
        tokenizer = self.llm.get_tokenizer()
        encode = lambda text: list(tokenizer.encode(text, add_special_tokens=False))  # noqa: E731
        context = {r.id: (list(r.prompt_token_ids) if r.prompt_token_ids is not None
                          else list(tokenizer.encode(r.prompt))) for r in sessions}
        for turn in range(max(len(r.turns or []) for r in sessions)):
            active = [r for r in sessions if turn < len(r.turns or [])]
            for r in active:
                context[r.id] += encode(r.turns[turn])
                check_fits(self.blocks, r, len(context[r.id]))
            prompts = [{"prompt_token_ids": list(context[r.id])} for r in active]
            for request, (output, elapsed) in zip(active, self.generate(active, prompts, wave, turn)):
                result = to_result(request, self.group.name, output, elapsed, f"{request.id}.t{turn:02d}")
                context[request.id] += result.output_ids
                self.emit(result)

    def run(self) -> tuple[int, int, float]:
        for wave in sorted({r.wave for r in self.group.requests}):
            batch = [r for r in self.group.requests if r.wave == wave]
            plain = [r for r in batch if not r.turns]
            if plain:
                self.run_plain(plain, wave)
            sessions = [r for r in batch if r.turns]
            if sessions:
                self.run_sessions(sessions, wave)
        return (sum(s["prompt_tokens"] for s in self.steps), sum(s["output_tokens"] for s in self.steps),
                sum(s["elapsed_s"] for s in self.steps))


def run_group(job: Job, group: Group, sink: Sink) -> GroupResult:
    imports = time.time()
    from vllm import LLM  # the first group imports the engine

    import_s = time.time() - imports
    kwargs = engine_kwargs(job, group)
    for request in group.requests:
        sampling_params(request)  # bad sampling params are refused before the engine starts
    t0 = time.time()
    # What is alive now (the engine's modules, earlier groups' survivors) leaves the five full
    # collections the engine makes while it starts; its shutdown unfreezes and collects everything
    # (docs/engine-notes.md, "Running it").
    gc.freeze()
    llm = LLM(model=group.model or job.model, **kwargs)
    startup = time.time() - t0
    runner = GroupRunner(llm, group, sink)
    prompt_tokens, output_tokens, elapsed = runner.run()
    from infercheck.run.lm_eval_runner import evaluate, make_live_vllm

    evaluated = evaluate(lambda: make_live_vllm(llm), group, sink)
    metrics = engine_metrics(llm)
    del llm
    gc.collect()
    return GroupResult(group.name, group.engine_args, len(group.requests), prompt_tokens, output_tokens,
                       round(elapsed, 4), round(startup, 3), metrics, runner.steps,
                       import_s=round(import_s + evaluated.import_s, 3), lm_eval_s=round(evaluated.run_s, 3))
