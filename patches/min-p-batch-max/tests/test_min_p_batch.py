"""Reproduction from the report: a min_p request keeps the same tokens whether it runs alone or
next to a more confident request (min_p is relative to the request's own most likely token)."""

import torch

from vllm import SamplingParams
from vllm.v1.sample.logits_processor.builtin import MinPLogitsProcessor
from vllm.v1.sample.logits_processor.interface import BatchUpdate

VOCAB = 64


class Config:  # the processor reads only max_num_seqs
    class scheduler_config:
        max_num_seqs = 8


def kept(rows: list[SamplingParams], logits: torch.Tensor) -> list[int]:
    processor = MinPLogitsProcessor(Config, torch.device("cpu"), False)
    processor.update_state(BatchUpdate(batch_size=len(rows), removed=[],
                                       added=[(i, p, [1], []) for i, p in enumerate(rows)], moved=[]))
    return torch.isfinite(processor.apply(logits.clone())).sum(dim=1).tolist()


def test_min_p_request_keeps_its_tokens_next_to_a_confident_one():
    torch.manual_seed(0)
    flat = torch.randn(1, VOCAB) * 0.5
    confident = torch.randn(1, VOCAB)
    confident[0, 3] = 12.0
    alone = kept([SamplingParams(min_p=0.2)], flat)
    batched = kept([SamplingParams(min_p=0.2), SamplingParams()], torch.cat([flat, confident]))
    assert alone[0] > 1
    assert batched == [alone[0], VOCAB], f"alone it keeps {alone[0]} tokens, batched {batched[0]}"
