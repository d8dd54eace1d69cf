"""Reproduction from the report: a request with min_tokens must not be able to end before it has
min_tokens output tokens — eos (id 2 on tiny-llama-add) is held back like its stop_token_ids."""

import torch

from vllm import SamplingParams
from vllm.v1.sample.logits_processor.builtin import MinTokensLogitsProcessor
from vllm.v1.sample.logits_processor.interface import BatchUpdate

EOS, VOCAB = 2, 64


def request(**kwargs):
    params = SamplingParams(temperature=1.0, max_tokens=16, **kwargs)
    params.update_from_generation_config({}, eos_token_id=EOS)  # what the engine does for every request
    return params


def test_min_tokens_holds_back_eos():
    outputs = []
    processor = MinTokensLogitsProcessor(None, torch.device("cpu"), False)
    processor.update_state(BatchUpdate(batch_size=1, removed=[], added=[(0, request(min_tokens=4), [1, 5, 14], outputs)],
                                       moved=[]))
    logits = processor.apply(torch.zeros(1, VOCAB))
    assert torch.isneginf(logits[0, EOS]), "eos can end the request before min_tokens"
    assert torch.isfinite(logits[0, :EOS]).all() and torch.isfinite(logits[0, EOS + 1:]).all()
