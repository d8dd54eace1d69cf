"""lm-eval inside a worker: tasks run against the worker's live engine (no second engine starts).

`LiveVLLM` is a small lm-eval model around a running `vllm.LLM`; the HF reference uses lm-eval's
own `HFLM` around the already-loaded model. Both add <s> the way the tokenizer does, so the two
score the same token sequences. Per-sample 0/1 results are returned for paired statistics.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from infercheck.run.job import Group, LmEvalTask, Sink, WorkerInputError


@dataclass(frozen=True)
class EvalTime:
    """Seconds a group spent on lm-eval: importing it (the first group that runs a task) and running its tasks."""

    import_s: float = 0.0
    run_s: float = 0.0


def evaluate(make_lm: Callable[[], Any], group: Group, sink: Sink) -> EvalTime:
    """Run the group's lm-eval tasks (none: nothing to do) against make_lm()'s model, the sample rows
    to the sink; returns the time it took."""
    if not group.lm_eval:
        return EvalTime()
    t0 = time.time()
    import lm_eval.api.model  # noqa: F401  (lm-eval's import, timed apart from its tasks)
    import lm_eval.tasks  # noqa: F401
    t1 = time.time()
    sink.emit_samples(run_tasks(make_lm(), group.lm_eval, group.name))
    return EvalTime(t1 - t0, time.time() - t1)


def make_live_vllm(llm: Any) -> Any:
    from lm_eval.api.model import TemplateLM
    from vllm import SamplingParams

    tokenizer = llm.get_tokenizer()

    class LiveVLLM(TemplateLM):
        def __init__(self) -> None:
            super().__init__()
            self.tokenizer = tokenizer

        @property
        def eot_token_id(self) -> int:
            return tokenizer.eos_token_id

        @property
        def prefix_token_id(self) -> int:
            return tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id

        def tok_encode(self, string: str, add_special_tokens: bool | None = None, **kwargs: Any) -> list[int]:
            if add_special_tokens is None:
                return tokenizer.encode(string)
            return tokenizer.encode(string, add_special_tokens=add_special_tokens)

        def _loglikelihood_tokens(self, requests: list, disable_tqdm: bool = False, **kwargs: Any) -> list:
            prompts = [{"prompt_token_ids": list(ctx) + list(cont)} for _, ctx, cont in requests]
            params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=1)
            outputs = llm.generate(prompts, params, use_tqdm=False)
            results = []
            for (_, ctx, cont), out in zip(requests, outputs):
                positions = out.prompt_logprobs[len(ctx):]
                total, greedy = 0.0, True
                for token, pos in zip(cont, positions):
                    total += pos[token].logprob
                    best = max(pos.items(), key=lambda kv: kv[1].logprob)[0]
                    greedy &= best == token
                results.append((total, greedy))
            return results

        def loglikelihood_rolling(self, requests: list, disable_tqdm: bool = False) -> list:
            raise NotImplementedError("loglikelihood_rolling is not used by infercheck's suites")

        def generate_until(self, requests: list, disable_tqdm: bool = False) -> list[str]:
            prompts, params = [], []
            for req in requests:
                context, gen_kwargs = req.args
                kwargs = dict(gen_kwargs)
                until = kwargs.pop("until", None) or []
                max_tokens = kwargs.pop("max_gen_toks", 64)
                do_sample = kwargs.pop("do_sample", False)
                temperature = kwargs.pop("temperature", 0.0) if do_sample else 0.0
                prompts.append(context)
                params.append(SamplingParams(max_tokens=max_tokens, stop=list(until), temperature=temperature))
            outputs = llm.generate(prompts, params, use_tqdm=False)
            return [o.outputs[0].text for o in outputs]

    return LiveVLLM()


def make_hf(model: Any, tokenizer: Any) -> Any:
    from lm_eval.models.huggingface import HFLM

    return HFLM(pretrained=model, tokenizer=tokenizer, batch_size=16, add_bos_token=True, device="cpu")


@functools.lru_cache(maxsize=None)  # several suites share one staged folder: resolved once per worker
def resolved_tasks(folder: Path) -> Path:
    """The task folder with each task's relative data files made absolute against it, written to a
    fresh temporary folder (the staged folder is read-only in a worker's view); the folder itself
    where no task names a relative data file."""
    import tempfile

    import yaml

    specs = {}
    for path in sorted(folder.glob("*.yaml")):
        try:
            spec = yaml.safe_load(path.read_text())
        except yaml.YAMLError:  # a task with lm-eval's own tags: left as it is
            continue
        files = (spec.get("dataset_kwargs") or {}).get("data_files") if isinstance(spec, dict) else None
        if isinstance(files, dict) and any(not Path(str(f)).is_absolute() for f in files.values()):
            files.update({k: str(folder / str(f)) for k, f in files.items()})
            specs[path.name] = spec
    if not specs:
        return folder
    out = Path(tempfile.mkdtemp(prefix="tasks-"))
    for path in folder.glob("*.yaml"):
        text = yaml.safe_dump(specs[path.name], sort_keys=False) if path.name in specs else path.read_text()
        (out / path.name).write_text(text)
    return out


def run_tasks(lm: Any, tasks: list[LmEvalTask], group: str) -> list[dict[str, Any]]:
    """Run lm-eval tasks and return one row per (task, sample) with its metric values."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    rows: list[dict[str, Any]] = []
    for task in tasks:
        include = str(resolved_tasks(Path(task.include_path).resolve()))
        manager = TaskManager(include_path=include, include_defaults=task.include_defaults)
        try:
            out = lm_eval.simple_evaluate(model=lm, tasks=[task.name], task_manager=manager, limit=task.limit,
                                          num_fewshot=task.num_fewshot, log_samples=True, bootstrap_iters=0,
                                          verbosity="ERROR")
        except (KeyError, ValueError) as exc:
            raise WorkerInputError("bad_task", f"lm-eval task {task.name}: {type(exc).__name__}: {exc}") from None
        except (ConnectionError, OSError) as exc:
            raise WorkerInputError("offline", f"lm-eval task {task.name} needs data that is not available "
                                              f"offline ({type(exc).__name__}: {str(exc)[:200]})") from None
        for sample in out["samples"][task.name]:
            metrics = {m: float(sample[m]) for m in task.metrics if m in sample}
            rows.append({"group": group, "suite": task.label, "task": task.name, "doc_id": int(sample["doc_id"]), "metrics": metrics,
                         "target": str(sample.get("target")), "response": str(sample.get("filtered_resps"))[:200]})
    return rows
