"""Which accelerator this host offers to engine workers: "cuda" or "cpu"."""

from __future__ import annotations

import os
import shutil
import subprocess


def detect_device() -> str:
    """$INFERCHECK_DEVICE if set, else "cuda" when nvidia-smi lists a GPU, else "cpu"."""
    forced = os.environ.get("INFERCHECK_DEVICE", "").strip().lower()
    if forced in ("cpu", "cuda"):
        return forced
    if shutil.which("nvidia-smi"):
        try:
            probe = subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=20)
            if probe.returncode == 0 and b"GPU" in probe.stdout:
                return "cuda"
        except (OSError, subprocess.TimeoutExpired):
            pass
    return "cpu"
