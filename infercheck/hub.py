"""Is the Hugging Face hub reachable, or is there a local copy of what a run needs from it? Standard
tasks and hub models need one or the other; bundled ones never do."""

from __future__ import annotations

import functools
import os
import socket
from pathlib import Path

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


def hf_hub_cache() -> Path:
    """The Hugging Face hub cache (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    return Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"


def cached_on_disk(repo_id: str, kind: str) -> bool:
    """Has a hub repo (`kind` "models" or "datasets") a downloaded snapshot in the local hub cache,
    which the workers read offline (HF_HUB_OFFLINE)?"""
    snapshots = hf_hub_cache() / f"{kind}--{repo_id.replace('/', '--')}" / "snapshots"
    return snapshots.is_dir() and any(p.is_dir() and any(p.iterdir()) for p in snapshots.iterdir())

