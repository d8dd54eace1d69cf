"""Reproduction from the report: two tenants send the same prompt under different `cache_salt`s,
and the second is served the first one's cached blocks (the salt must isolate them)."""

import torch

from vllm.sampling_params import SamplingParams
from vllm.utils.hashing import sha256
from vllm.v1.core.kv_cache_manager import KVCacheManager
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
from vllm.v1.request import Request

BLOCK = 16


def request(rid: str, tokens: list[int], salt: str) -> Request:
    params = SamplingParams(max_tokens=4)
    params.update_from_generation_config({}, eos_token_id=2)
    return Request(request_id=rid, prompt_token_ids=tokens, sampling_params=params, pooling_params=None,
                   cache_salt=salt, block_hasher=get_request_block_hasher(BLOCK, sha256))


def test_a_prompt_under_another_salt_is_not_served_the_first_salts_blocks():
    init_none_hash(sha256)
    spec = FullAttentionSpec(block_size=BLOCK, num_kv_heads=1, head_size=1, dtype=torch.float32)
    config = KVCacheConfig(num_blocks=16, kv_cache_tensors=[], kv_cache_groups=[KVCacheGroupSpec(["layer"], spec)])
    manager = KVCacheManager(config, max_model_len=512, enable_caching=True, hash_block_size=BLOCK,
                             scheduler_block_size=BLOCK)
    tokens = [5 + (i % 7) for i in range(3 * BLOCK + 4)]
    first = request("tenant-a", tokens, "tenant-a")
    blocks, cached, _ = manager.get_computed_blocks(first)
    assert cached == 0
    assert manager.allocate_slots(first, len(tokens), cached, blocks) is not None
    manager.free(first)
    _, cached, _ = manager.get_computed_blocks(request("tenant-b", tokens, "tenant-b"))
    assert cached == 0
