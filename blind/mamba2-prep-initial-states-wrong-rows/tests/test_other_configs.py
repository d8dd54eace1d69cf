# SPDX-License-Identifier: Apache-2.0
"""Neighbouring schedules of the same layer; not the reported symptom (that is
test_repro.py::test_chunked_prompt_alone_matches_single_prefill).

They cover what the candidate fixes differ on: a continuing chunk sharing the
step with decode rows and with new prompts, the same with enough decode rows,
a new prompt landing on a recycled state block, and the batch-level
`prep_initial_states` flag the builder hands to the layer.
"""

import torch

from mamba2_harness import TOL, Mamba2Harness, max_diff, reference, tokens


def _check(name, got, want):
    d = max_diff(got, want)
    assert d < TOL, f"{name}: max|d|={d:.3g}"


def test_chunk_next_to_decode_and_new_prompt(monkeypatch):
    """step 1: R (6-token prompt) and A's first chunk (8 of 16);
    step 2: R decodes, A's second chunk, B (5-token prompt) arrives.
    One decode row, one continuing chunk, one fresh prompt."""
    r, a, b = tokens(7, seed=2), tokens(16, seed=3), tokens(5, seed=4)
    ref_r, _ = reference(monkeypatch, r)
    ref_a, ref_a_state = reference(monkeypatch, a)
    ref_b, _ = reference(monkeypatch, b)

    h = Mamba2Harness(monkeypatch)
    out_r, out_a = h.step([(1, 0, 6, r[:6]), (2, 0, 16, a[:8])])
    _check("R prefill", out_r, ref_r[:6])
    _check("A chunk 1", out_a, ref_a[:8])

    out_r, out_a, out_b = h.step(
        [(1, 6, 6, r[6:]), (2, 8, 16, a[8:]), (3, 0, 5, b)]
    )
    _check("R decode", out_r, ref_r[6:])
    _check("B prefill", out_b, ref_b)
    _check("A chunk 2", out_a, ref_a[8:])
    _check("A state", h.ssm_state(2), ref_a_state)


def test_chunk_next_to_decode_only(monkeypatch):
    """Same as above without B: one decode row and one continuing chunk."""
    r, a = tokens(7, seed=2), tokens(16, seed=3)
    ref_r, _ = reference(monkeypatch, r)
    ref_a, ref_a_state = reference(monkeypatch, a)

    h = Mamba2Harness(monkeypatch)
    h.step([(1, 0, 6, r[:6]), (2, 0, 16, a[:8])])
    out_r, out_a = h.step([(1, 6, 6, r[6:]), (2, 8, 16, a[8:])])
    _check("R decode", out_r, ref_r[6:])
    _check("A chunk 2", out_a, ref_a[8:])
    _check("A state", h.ssm_state(2), ref_a_state)


def test_two_prompts_chunked_back_to_back(monkeypatch):
    """A (12 tokens) and B (10 tokens) under an 8-token budget, nothing
    decoding: step 2 carries A's last chunk and B's first chunk, step 3 B's
    last chunk."""
    a, b = tokens(12, seed=5), tokens(10, seed=6)
    ref_a, _ = reference(monkeypatch, a)
    ref_b, _ = reference(monkeypatch, b)

    h = Mamba2Harness(monkeypatch)
    h.step([(1, 0, 12, a[:8])])
    out_a, out_b1 = h.step([(1, 8, 12, a[8:]), (2, 0, 10, b[:4])])
    _check("A chunk 2", out_a, ref_a[8:])
    _check("B chunk 1", out_b1, ref_b[:4])
    # step 3: A decodes its first generated token (not compared), B continues
    (_, out_b2) = h.step([(1, 12, 12, tokens(1, seed=7)), (2, 4, 10, b[4:])])
    _check("B chunk 2", out_b2, ref_b[4:])


def test_new_prompt_on_recycled_block(monkeypatch):
    """X runs to completion on block 4 and finishes; block 4 goes back to the
    pool and a new request Y gets it. The cache is not cleared for Mamba
    groups on CPU (CPUModelRunner._zero_block_ids only zeroes full-attention
    blocks), so Y must not read X's leftover conv/SSM state."""
    x, y = tokens(9, seed=8), tokens(7, seed=9)
    ref_y, ref_y_state = reference(monkeypatch, y)

    h = Mamba2Harness(monkeypatch)
    h.step([(4, 0, 8, x[:8])])
    h.step([(4, 8, 8, x[8:])])  # one decode step, then X finishes
    assert float(h.layer.kv_cache[1][4].abs().max()) > 0

    (out_y,) = h.step([(4, 0, 7, y)])
    _check("Y on a recycled block", out_y, ref_y)
    _check("Y state", h.ssm_state(4), ref_y_state)


def test_prep_flag_matches_rows_with_state(monkeypatch):
    """The builder's batch-level prep_initial_states must say whether any
    prefill row resumes from a cached state, for every batch composition."""
    h = Mamba2Harness(monkeypatch)
    t = tokens(16, seed=10)
    cases = {
        "chunk alone": [(1, 8, 16, t[:8])],
        "chunk + new prompt": [(1, 8, 16, t[:8]), (2, 0, 8, t[8:])],
        "decode + chunk": [(3, 6, 6, t[:1]), (1, 8, 16, t[1:9])],
        "decode + chunk + new prompt": [
            (3, 6, 6, t[:1]),
            (1, 8, 16, t[1:9]),
            (2, 0, 5, t[9:14]),
        ],
        "new prompts only": [(1, 0, 8, t[:8]), (2, 0, 8, t[8:])],
        "decode + new prompt": [(3, 6, 6, t[:1]), (2, 0, 8, t[1:9])],
    }
    wrong = {}
    for name, rows in cases.items():
        for blk in (1, 2, 3):  # start every case from a clean cache
            h.layer.kv_cache[0][blk].zero_()
            h.layer.kv_cache[1][blk].zero_()
        h.step(rows)
        md = h.last_metadata
        want = bool(md.has_initial_states_p.any())
        if md.prep_initial_states != want:
            wrong[name] = (md.prep_initial_states, want)
    assert not wrong, f"prep_initial_states (got, want): {wrong}"


def test_decode_only_batch(monkeypatch):
    """Plain batched decode after two prompts (no chunking)."""
    a, b = tokens(6, seed=11), tokens(9, seed=12)
    ref_a, _ = reference(monkeypatch, a)
    ref_b, _ = reference(monkeypatch, b)
    h = Mamba2Harness(monkeypatch)
    h.step([(1, 0, 5, a[:5]), (2, 0, 8, b[:8])])
    out_a, out_b = h.step([(1, 5, 5, a[5:]), (2, 8, 8, b[8:])])
    _check("A decode", out_a, ref_a[5:])
    _check("B decode", out_b, ref_b[8:])
    assert torch.isfinite(out_a).all() and torch.isfinite(out_b).all()
