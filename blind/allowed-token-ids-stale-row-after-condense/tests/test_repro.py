# SPDX-License-Identifier: Apache-2.0
"""User repro: a request that sets no allowed_token_ids gets restricted to
another request's whitelist after the batch changed.

Drives the persistent batch (InputBatch) the way the V1 model runner does each
step on CPU (add new requests, remove finished ones, condense, refresh the
sampling metadata) and then runs the V1 Sampler on hand-made logits. No engine
and no model are needed.
"""

import torch

from vllm.sampling_params import SamplingParams
from vllm.v1.sample.logits_processor import LogitsProcessors
from vllm.v1.sample.sampler import Sampler
from vllm.v1.worker.gpu_input_batch import CachedRequestState, InputBatch

VOCAB = 32
MAX_REQS = 8
WHITELIST = [5, 6, 7]


def _batch() -> InputBatch:
    return InputBatch(
        max_num_reqs=MAX_REQS,
        max_model_len=64,
        max_num_batched_tokens=64,
        device=torch.device("cpu"),
        vocab_size=VOCAB,
        block_sizes=[16],
        max_num_blocks_per_req=[4],
        logitsprocs=LogitsProcessors(),
    )


def _req(req_id: str, allowed: list[int] | None = None) -> CachedRequestState:
    return CachedRequestState(
        req_id=req_id,
        prompt_token_ids=[1, 2, 3],
        mm_features=[],
        sampling_params=SamplingParams(
            temperature=0.0, max_tokens=8, allowed_token_ids=allowed
        ),
        generator=None,
        block_ids=([0],),
        num_computed_tokens=0,
        output_token_ids=[],
    )


def _step(batch: InputBatch, add=(), remove=()) -> None:
    """One scheduler step as GPUModelRunner._update_states applies it."""
    for req_id in remove:
        batch.remove_request(req_id)
    for req in add:
        batch.add_request(req)
    batch.condense()
    batch.refresh_metadata()


def _greedy(batch: InputBatch) -> dict[str, int]:
    # Every request's raw favourite is token 20, which is outside WHITELIST.
    logits = torch.zeros(batch.num_reqs, VOCAB)
    logits[:, 20] = 5.0
    logits[:, 6] = 1.0
    md = batch.sampling_metadata
    out = Sampler().apply_logits_processors(logits, md, predict_bonus_token=False)
    tokens = out.argmax(dim=-1).tolist()
    return {req_id: tokens[batch.req_id_to_index[req_id]] for req_id in batch.req_ids}


def test_unrestricted_request_after_finish():
    """r0 (no whitelist) and r1 (whitelist) run together; r0 finishes, then
    r2 (no whitelist) arrives while r1 is still generating."""
    batch = _batch()
    _step(batch, add=[_req("r0"), _req("r1", WHITELIST)])
    assert _greedy(batch) == {"r0": 20, "r1": 6}

    _step(batch, remove=["r0"])
    assert _greedy(batch) == {"r1": 6}

    _step(batch, add=[_req("r2")])
    got = _greedy(batch)
    # r1 keeps its whitelist, r2 has none and must get its own argmax.
    assert got == {"r1": 6, "r2": 20}, got
