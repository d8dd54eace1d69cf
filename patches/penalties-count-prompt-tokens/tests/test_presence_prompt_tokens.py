"""Reproduction from the report: presence_penalty penalizes the tokens a request has generated, not
the tokens of its prompt (OpenAI's definition, which vLLM's docs cite)."""

import torch

from vllm.v1.sample.ops.penalties import apply_all_penalties

VOCAB = 64


def test_presence_penalty_ignores_prompt_only_tokens():
    logits = torch.zeros(1, VOCAB)
    prompt = torch.tensor([[5, 6, 6, VOCAB]])  # padded with the vocabulary size, as the input batch does
    out = apply_all_penalties(logits, prompt, presence_penalties=torch.tensor([1.5]),
                              frequency_penalties=torch.tensor([0.0]), repetition_penalties=torch.tensor([1.0]),
                              output_token_ids=[[7, 9]])
    assert out[0, 7].item() == -1.5 and out[0, 9].item() == -1.5  # generated: penalized once each
    assert out[0, 5].item() == 0.0 and out[0, 6].item() == 0.0, "tokens only in the prompt were penalized"
    assert (out[0, [t for t in range(VOCAB) if t not in (7, 9)]] == 0).all()
