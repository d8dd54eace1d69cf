"""Workers: one subprocess per variant; the only place engines (vllm, torch, lm-eval) are imported."""
