# SPDX-License-Identifier: Apache-2.0
"""Drive one Mamba2 layer step by step the way the V1 CPU runner does, without
an engine or a model.

Per step: build a CommonAttentionMetadata for the scheduled rows (ordered like
reorder_batch_to_split_decodes_and_prefills leaves them: decodes, continuing
prefill chunks, fresh prefills), run the real Mamba2AttentionMetadataBuilder,
and feed its metadata to the real MambaMixer2.conv_ssm_forward (CPU ops:
causal_conv1d_fn_cpu, the CPU chunk scan, causal_conv1d_update_cpu and the CPU
selective_state_update backend) on a small state cache. The layer object is a
stand-in carrying only the attributes conv_ssm_forward reads; its weights are
random.
"""

from types import SimpleNamespace

import torch

import vllm.model_executor.layers.mamba.mamba_mixer2 as mixer2_mod
import vllm.model_executor.layers.mamba.ops.ssu_dispatch as ssu_dispatch
from vllm.config.compilation import CUDAGraphMode
from vllm.model_executor.layers.mamba.mamba_mixer2 import MambaMixer2
from vllm.model_executor.layers.mamba.mamba_utils import is_conv_state_dim_first
from vllm.v1.attention.backend import CommonAttentionMetadata
from vllm.v1.attention.backends.mamba2_attn import Mamba2AttentionMetadataBuilder
from vllm.v1.kv_cache_interface import MambaSpec

NHEADS, HEADDIM, NGROUPS, DSTATE, WIDTH = 2, 4, 1, 4, 4
INTER = NHEADS * HEADDIM
CONV_DIM = INTER + 2 * NGROUPS * DSTATE
PROJ = INTER + CONV_DIM + NHEADS  # [gate | x,B,C (conv input) | dt]
CHUNK_SIZE = 8
MAX_LEN = 64
NUM_BLOCKS = 8
PREFIX = "backbone.layers.0.mixer"
DEVICE = torch.device("cpu")


def _conv_cache_shape() -> tuple[int, int]:
    if is_conv_state_dim_first():
        return (CONV_DIM, WIDTH - 1)
    return (WIDTH - 1, CONV_DIM)


class Mamba2Harness:
    """One Mamba2 layer with its own state cache and metadata builder."""

    def __init__(self, monkeypatch, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        conv_w = torch.randn(CONV_DIM, WIDTH, generator=g) * 0.5
        conv_b = torch.randn(CONV_DIM, generator=g) * 0.1
        self.layer = SimpleNamespace(
            prefix=PREFIX,
            cache_config=SimpleNamespace(mamba_cache_mode="none"),
            num_spec=0,
            use_replayssm=False,
            tped_intermediate_size=INTER,
            tped_conv_size=CONV_DIM,
            tped_dt_size=NHEADS,
            conv_weights=conv_w,
            conv1d=SimpleNamespace(bias=conv_b),
            activation="silu",
            A=-(torch.rand(NHEADS, generator=g) * 0.5 + 0.1),
            D=torch.randn(NHEADS, generator=g),
            dt_bias=torch.randn(NHEADS, generator=g) * 0.1,
            num_heads=NHEADS,
            tp_size=1,
            head_dim=HEADDIM,
            n_groups=NGROUPS,
            ssm_state_size=DSTATE,
            conv_kernel_size=WIDTH,
            is_blackwell=False,
            _updates_replayssm_trackers=True,
            _commits_replayssm_trackers=True,
            split_hidden_states_B_C_fn=lambda t: torch.split(
                t, [INTER, NGROUPS * DSTATE, NGROUPS * DSTATE], dim=-1
            ),
        )
        self.layer.kv_cache = (
            torch.zeros(NUM_BLOCKS, *_conv_cache_shape()),
            torch.zeros(NUM_BLOCKS, NHEADS, HEADDIM, DSTATE),
        )

        vllm_config = SimpleNamespace(
            cache_config=SimpleNamespace(
                mamba_cache_mode="none",
                use_replayssm=False,
                replayssm_buffer_len=16,
                block_size=MAX_LEN,
            ),
            compilation_config=SimpleNamespace(
                cudagraph_mode=CUDAGraphMode.NONE,
                max_cudagraph_capture_size=None,
            ),
            speculative_config=None,
            num_speculative_tokens=0,
            parallel_config=SimpleNamespace(decode_context_parallel_size=1),
            scheduler_config=SimpleNamespace(max_num_seqs=8),
            model_config=SimpleNamespace(
                max_model_len=MAX_LEN, get_mamba_chunk_size=lambda: CHUNK_SIZE
            ),
            mamba_config=SimpleNamespace(backend=None),
        )
        spec = MambaSpec(
            block_size=MAX_LEN,
            shapes=(_conv_cache_shape(), (NHEADS, HEADDIM, DSTATE)),
            dtypes=(torch.float32, torch.float32),
            mamba_cache_mode="none",
        )
        self.builder = Mamba2AttentionMetadataBuilder(
            spec, [PREFIX], vllm_config, DEVICE
        )
        self._monkeypatch = monkeypatch
        # Decode rows go through the CPU selective_state_update backend.
        monkeypatch.setattr(
            ssu_dispatch, "_mamba_ssu_backend", ssu_dispatch.CPUSSUBackend(None)
        )
        self.last_metadata = None

    def step(self, rows):
        """rows: list of (block_id, num_computed, prompt_len, projections),
        ordered decodes -> continuing chunks -> fresh prefills. Returns the
        per-row SSM outputs (query_len, NHEADS * HEADDIM)."""
        query_lens = [int(r[3].shape[0]) for r in rows]
        qsl = torch.zeros(len(rows) + 1, dtype=torch.int32)
        qsl[1:] = torch.tensor(query_lens, dtype=torch.int32).cumsum(0)
        computed = torch.tensor([r[1] for r in rows], dtype=torch.int32)
        seq_lens = computed + torch.tensor(query_lens, dtype=torch.int32)
        prompt_lens = torch.tensor([r[2] for r in rows], dtype=torch.int32)
        num_tokens = int(qsl[-1])
        cam = CommonAttentionMetadata(
            query_start_loc=qsl,
            query_start_loc_cpu=qsl.clone(),
            seq_lens=seq_lens,
            seq_lens_cpu_upper_bound=seq_lens.clone(),
            num_reqs=len(rows),
            num_actual_tokens=num_tokens,
            max_query_len=max(query_lens),
            max_seq_len=int(seq_lens.max()),
            block_table_tensor=torch.tensor(
                [[r[0]] for r in rows], dtype=torch.int32
            ),
            slot_mapping=torch.zeros(num_tokens, dtype=torch.int64),
            causal=True,
            is_prefilling=computed < prompt_lens,
        )
        metadata = self.builder.build(0, cam)
        self.last_metadata = metadata
        self._monkeypatch.setattr(
            mixer2_mod,
            "get_forward_context",
            lambda: SimpleNamespace(attn_metadata={PREFIX: metadata}),
        )
        projected = torch.cat([r[3] for r in rows], dim=0).contiguous()
        output = torch.zeros(num_tokens, INTER)
        MambaMixer2.conv_ssm_forward(self.layer, projected, output)
        return list(torch.split(output, query_lens, dim=0))

    def ssm_state(self, block_id: int) -> torch.Tensor:
        return self.layer.kv_cache[1][block_id].clone()


def tokens(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 + seed)
    return torch.randn(n, PROJ, generator=g)


def reference(monkeypatch, projections: torch.Tensor, seed: int = 0):
    """The whole sequence as one prefill on a fresh cache (no chunking, no
    batching): the outputs every schedule must reproduce."""
    h = Mamba2Harness(monkeypatch, seed=seed)
    n = int(projections.shape[0])
    (out,) = h.step([(1, 0, n, projections)])
    return out, h.ssm_state(1)


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max())


TOL = 1e-4
