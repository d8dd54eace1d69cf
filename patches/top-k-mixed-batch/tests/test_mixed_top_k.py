"""Reproduction from the report: one batch, each row with its own top_k (64 = the vocabulary, i.e.
top-k off). vLLM's CPU sampler masks everything below each row's k-th largest logit."""

import torch

from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p


def test_each_row_keeps_its_own_top_k():
    torch.manual_seed(0)
    logits = torch.randn(4, 64)
    k = torch.tensor([2, 8, 64, 5], dtype=torch.int32)
    out = apply_top_k_top_p(logits.clone(), k, None)
    kept = torch.isfinite(out).sum(dim=1).tolist()
    assert kept == [2, 8, 64, 5]
    # the kept tokens are each row's largest logits
    for row, n in enumerate(kept):
        assert set(torch.isfinite(out[row]).nonzero().flatten().tolist()) == set(logits[row].topk(n).indices.tolist())
