"""Reproduction from the report: greedy generation with stop strings that span two tokens and
include_stop_str_in_output=True must end right after the first stop string, as the same requests
without stop strings show."""

import os
from pathlib import Path

for key, value in {"VLLM_HOST_IP": "127.0.0.1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
                   "TORCH_COMPILE_DISABLE": "1", "VLLM_NO_USAGE_STATS": "1"}.items():
    os.environ.setdefault(key, value)

from vllm import LLM, SamplingParams  # noqa: E402

MODEL = Path(__file__).resolve().parents[3] / "suites" / "models" / "tiny-llama-add"
STOPS = ["+8", "=0", "9\n"]
PROMPTS = [
    "75+60=135\n94+74=168\n13+54=",
    "21+39=060\n48+17=065\n30+26=",
    "62+93=155\n05+71=076\n88+14=",
    "57+36=093\n12+45=057\n",
]


def first_stop_end(text: str) -> int | None:
    ends = [i + len(s) for s in STOPS if (i := text.find(s)) >= 0]
    return min(ends) if ends else None


def test_included_stop_string_ends_output():
    llm = LLM(model=str(MODEL), dtype="float32", enforce_eager=True, seed=0,
              kv_cache_memory_bytes=256 * 1024 * 1024)
    free = llm.generate(PROMPTS, SamplingParams(temperature=0.0, max_tokens=24, ignore_eos=True))
    kept = llm.generate(PROMPTS, SamplingParams(temperature=0.0, max_tokens=24, ignore_eos=True, stop=STOPS,
                                                include_stop_str_in_output=True))
    hits = 0
    for f, k in zip(free, kept):
        end = first_stop_end(f.outputs[0].text)
        if end is None:
            assert (k.outputs[0].text, k.outputs[0].finish_reason) == (f.outputs[0].text, "length")
        else:
            hits += 1
            assert (k.outputs[0].text, k.outputs[0].finish_reason) == (f.outputs[0].text[:end], "stop")
    assert hits >= 2
