"""Is the Hugging Face hub reachable? Standard tasks and hub models need it; bundled ones never do."""

from __future__ import annotations

import os
import socket

HUB_HOST = ("huggingface.co", 443)


def hub_reachable(timeout_s: float = 3.0) -> bool:
    """False when HF_HUB_OFFLINE is set or a TCP connection to the hub fails."""
    if os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0"):
        return False
    try:
        with socket.create_connection(HUB_HOST, timeout=timeout_s):
            return True
    except OSError:
        return False


def offline_env() -> dict[str, str]:
    """Environment that keeps HF libraries from trying the network (set for workers when offline)."""
    return {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
