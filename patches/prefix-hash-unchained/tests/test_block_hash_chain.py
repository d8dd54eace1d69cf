"""Reproduction from the report: a prompt whose first block holds the same tokens as another
prompt's second block gets that block's hash, so the prefix cache serves it KV computed at other
positions after other tokens (a block's KV depends on every token before it)."""

from vllm.utils.hashing import sha256
from vllm.v1.core.kv_cache_utils import hash_block_tokens, init_none_hash

BLOCK = 16


def test_a_first_block_does_not_hash_like_an_equal_later_block():
    init_none_hash(sha256)
    first, second = list(range(4, 4 + BLOCK)), [7] * BLOCK
    chained = hash_block_tokens(sha256, hash_block_tokens(sha256, None, first), second)
    assert hash_block_tokens(sha256, None, second) != chained
