"""Is the Hugging Face hub reachable? Standard tasks and hub models need it; bundled ones never do."""

from __future__ import annotations

import functools
import os
import socket

HUB_HOST = ("huggingface.co", 443)


def hub_reachable(timeout_s: float = 3.0) -> bool:
    """False when HF_HUB_OFFLINE is set or a TCP connection to the hub fails."""
    if os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0"):
        return False
    return _connects(HUB_HOST, timeout_s)


@functools.lru_cache(maxsize=4)
def _connects(host: tuple[str, int], timeout_s: float) -> bool:
    """One probe per process: model lookup, suite selection and every engine env ask the same
    question, and an unreachable host can cost the full timeout each time."""
    try:
        with socket.create_connection(host, timeout=timeout_s):
            return True
    except OSError:
        return False


def offline_env() -> dict[str, str]:
    """Environment that keeps HF libraries from trying the network (set for workers when offline)."""
    return {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
