"""Reproduction from the report: Llama 3 rope scaling keeps frequencies whose wavelength is below
orig / high_freq_factor, divides those past orig / low_freq_factor by the factor and smooths the
band between; here the band between comes out unscaled."""

import math

import torch

from vllm.config import VllmConfig, set_current_vllm_config
from vllm.model_executor.layers.rotary_embedding import Llama3RotaryEmbedding

HEAD, BASE, FACTOR, LOW, HIGH, ORIGINAL = 128, 500000.0, 8.0, 1.0, 4.0, 8192  # Llama 3.1's parameters


def test_llama3_smooths_the_band_between_its_edges():
    with set_current_vllm_config(VllmConfig()):
        rope = Llama3RotaryEmbedding(HEAD, HEAD, 8192, BASE, True, torch.float32, FACTOR, LOW, HIGH, ORIGINAL)
    plain = 1.0 / BASE ** (torch.arange(0, HEAD, 2, dtype=torch.float) / HEAD)
    wavelength = 2 * math.pi / plain
    band = (wavelength > ORIGINAL / HIGH) & (wavelength < ORIGINAL / LOW)
    assert band.any()
    got = rope._compute_inv_freq(BASE)[band]
    assert bool(((got < plain[band]) & (got > plain[band] / FACTOR)).all()), (got, plain[band])
