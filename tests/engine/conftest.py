"""Engine-tier fixtures: real vLLM (CPU build) and real HF workers on the bundled models.

Runs are module- or session-scoped so each engine starts as few times as possible.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from infercheck.build.engine_env import installed_env
from infercheck.device import detect_device
from infercheck.models import zoo
from infercheck.run.job import Group, Job, Request
from infercheck.run.launcher import WorkerRun, launch

WORKER_TIMEOUT_S = 600


def greedy_requests(prefix: str, prompts: list[str], max_tokens: int, logprobs: int | None = 5) -> list[Request]:
    return [Request(id=f"{prefix}{i}", prompt=p, logprobs=logprobs,
                    sampling={"max_tokens": max_tokens, "temperature": 0.0, "ignore_eos": True})
            for i, p in enumerate(prompts)]


def run_job(backend: str, model: str, groups: list[Group], out: Path, env=None) -> WorkerRun:
    job = Job(backend, str(zoo.model_dir(model)), "float32", groups)
    return launch(job, env or installed_env(detect_device()), out, WORKER_TIMEOUT_S).raise_for_error()


def parity_prompts() -> list[str]:
    """16 held-out prompts: 8 zero-shot (6 tokens), 8 many-shot (400+ tokens)."""
    zero, _ = zoo.evaluation_prompts(many_shot=False, limit=8)
    many, _ = zoo.evaluation_prompts(many_shot=True, limit=8)
    return zero + many


@pytest.fixture(scope="session")
def llama_runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One vLLM worker (parity + accuracy groups) and one HF reference worker on tiny-llama-add."""
    out = tmp_path_factory.mktemp("llama")
    prompts = parity_prompts()
    zero_p, zero_a = zoo.evaluation_prompts(many_shot=False)
    many_p, many_a = zoo.evaluation_prompts(many_shot=True, limit=100)
    vllm = run_job("vllm", "tiny-llama-add", [
        Group("parity", {}, greedy_requests("p", prompts, 6)),
        Group("accuracy", {}, greedy_requests("a", zero_p + many_p, 4, logprobs=None)),
    ], out / "vllm")
    hf = run_job("hf", "tiny-llama-add", [Group("parity", {}, greedy_requests("p", prompts, 6))], out / "hf")
    return {"vllm": vllm, "hf": hf, "prompts": prompts, "answers": zero_a + many_a, "n_zero": len(zero_p)}
