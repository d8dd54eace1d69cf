# SPDX-License-Identifier: Apache-2.0
"""Reported symptom: a prompt that is chunk-prefilled while nothing else is
running comes out different from the same prompt prefilled in one step.

A 16-token prompt runs as two 8-token chunks (what max_num_batched_tokens=8
does to it), alone in the batch, through the real Mamba2 metadata builder and
MambaMixer2.conv_ssm_forward with the CPU ops. The second chunk's outputs and
the state left in the cache must match one 16-token prefill.
"""

from mamba2_harness import TOL, Mamba2Harness, max_diff, reference, tokens


def test_chunked_prompt_alone_matches_single_prefill(monkeypatch):
    prompt = tokens(16, seed=1)
    ref_out, ref_state = reference(monkeypatch, prompt)

    h = Mamba2Harness(monkeypatch)
    block = 3
    # step 1: first chunk (fresh)
    (out1,) = h.step([(block, 0, 16, prompt[:8])])
    assert max_diff(out1, ref_out[:8]) < TOL
    # step 2: second chunk continues from the cached conv/SSM state
    (out2,) = h.step([(block, 8, 16, prompt[8:])])

    d_out = max_diff(out2, ref_out[8:])
    d_state = max_diff(h.ssm_state(block), ref_state)
    assert d_out < TOL and d_state < TOL, (
        f"second chunk differs from a single prefill: max|d out|={d_out:.3g}, "
        f"max|d ssm state|={d_state:.3g}"
    )
