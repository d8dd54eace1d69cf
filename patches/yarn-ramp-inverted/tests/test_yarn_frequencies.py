"""Reproduction from the report: with YaRN scaling the fastest rotary frequencies, whose wavelength
is far below the original context, must stay as they are (only the slow ones are interpolated);
here they come out divided by the scaling factor."""

import torch

from vllm.config import VllmConfig, set_current_vllm_config
from vllm.model_executor.layers.rotary_embedding import YaRNScalingRotaryEmbedding

HEAD, BASE, ORIGINAL, FACTOR = 64, 10000.0, 2048, 4.0


def test_yarn_keeps_the_fastest_frequencies_unscaled():
    with set_current_vllm_config(VllmConfig()):
        rope = YaRNScalingRotaryEmbedding(HEAD, HEAD, ORIGINAL, BASE, True, FACTOR, torch.float32)
    plain = 1.0 / BASE ** (torch.arange(0, HEAD, 2, dtype=torch.float) / HEAD)
    torch.testing.assert_close(rope._compute_inv_freq(FACTOR)[:4], plain[:4])
