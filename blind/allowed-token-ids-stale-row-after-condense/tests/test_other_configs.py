# SPDX-License-Identifier: Apache-2.0
"""Neighbouring configurations of the same persistent-batch bookkeeping.

Not the reported symptom (that is test_repro.py::test_unrestricted_request_after_finish);
these cover the configurations the candidate fixes differ on:
several requests finishing in one step, and per-request state of other
features kept in the same slots (seeded generators, bad words).
"""

import torch

from vllm.sampling_params import SamplingParams
from vllm.v1.worker.gpu_input_batch import CachedRequestState

from test_repro import WHITELIST, _batch, _greedy, _req, _step


def test_two_finish_in_one_step():
    """r0 and r1 (no whitelist) finish in the same step while two whitelisted
    requests a and b keep running; then two free requests arrive."""
    batch = _batch()
    _step(
        batch,
        add=[_req("r0"), _req("r1"), _req("a", WHITELIST), _req("b", [7])],
    )
    assert _greedy(batch) == {"r0": 20, "r1": 20, "a": 6, "b": 7}

    _step(batch, remove=["r0", "r1"])
    assert _greedy(batch) == {"a": 6, "b": 7}

    _step(batch, add=[_req("r2"), _req("r3")])
    got = _greedy(batch)
    assert got == {"a": 6, "b": 7, "r2": 20, "r3": 20}, got


def test_whitelisted_request_finishes_and_slot_is_reused():
    """A whitelisted request finishes and a free request takes its slot in
    the same step."""
    batch = _batch()
    _step(batch, add=[_req("a", WHITELIST), _req("b", [7])])
    _step(batch, remove=["a"], add=[_req("r0")])
    got = _greedy(batch)
    assert got == {"b": 7, "r0": 20}, got


def _seeded(req_id: str, seed: int) -> CachedRequestState:
    gen = torch.Generator(device="cpu")
    gen.manual_seed(seed)
    return CachedRequestState(
        req_id=req_id,
        prompt_token_ids=[1, 2, 3],
        mm_features=[],
        sampling_params=SamplingParams(temperature=1.0, seed=seed, max_tokens=8),
        generator=gen,
        block_ids=([0],),
        num_computed_tokens=0,
        output_token_ids=[],
    )


def test_seeded_request_keeps_its_generator():
    batch = _batch()
    req = _seeded("s0", 1234)
    _step(batch, add=[_req("r0"), req])
    idx = batch.req_id_to_index["s0"]
    assert batch.sampling_metadata.generators.get(idx) is req.generator

    _step(batch, remove=["r0"])
    idx = batch.req_id_to_index["s0"]
    assert batch.sampling_metadata.generators.get(idx) is req.generator


def test_bad_words_kept_for_new_request():
    batch = _batch()
    req = CachedRequestState(
        req_id="bw",
        prompt_token_ids=[1, 2, 3],
        mm_features=[],
        sampling_params=SamplingParams(temperature=0.0, max_tokens=8),
        generator=None,
        block_ids=([0],),
        num_computed_tokens=0,
        output_token_ids=[],
    )
    # bad_words_token_ids is normally filled from the tokenizer.
    req.sampling_params._bad_words_token_ids = [[20]]
    _step(batch, add=[_req("r0", WHITELIST), req])
    assert batch.bad_words_token_ids == {1: [[20]]}
    got = _greedy(batch)
    assert got["bw"] != 20, got
