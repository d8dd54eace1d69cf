"""EngineEnv: what a worker subprocess needs to run one engine variant."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

from infercheck.hub import hub_reachable, offline_env
from infercheck.paths import REPO_ROOT

# Measured on the CPU build: in-process engine core, no torch.compile, loopback host.
CPU_ENGINE_ENV = {
    "VLLM_HOST_IP": "127.0.0.1",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "TORCH_COMPILE_DISABLE": "1",
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
CUDA_ENGINE_ENV = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "TOKENIZERS_PARALLELISM": "false"}


@dataclass(frozen=True)
class EngineEnv:
    name: str  # "base", "patched", "installed", ...
    strategy: str  # "installed" | "overlay" | "source"
    python: str
    tree_hash: str
    pythonpath: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    location: str = ""  # overlay folder or source venv
    # The CPUs a worker of this env is pinned to (its slot, run/slots.py); not part of its identity.
    cpus: tuple[int, ...] = ()

    def environ(self) -> dict[str, str]:
        """The full environment for a worker subprocess of this variant."""
        merged = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        merged.update(self.env)
        merged["PYTHONPATH"] = os.pathsep.join([*self.pythonpath, str(REPO_ROOT)])
        return merged


def default_engine_vars(device: str) -> dict[str, str]:
    """Engine settings for the device; HF offline flags unless the hub is reachable (hub models and
    standard tasks need it; without it HF libraries would stall on network timeouts)."""
    env = dict(CPU_ENGINE_ENV if device == "cpu" else CUDA_ENGINE_ENV)
    if not hub_reachable():
        env.update(offline_env())
    return env


def installed_env(device: str, tree_hash: str = "") -> EngineEnv:
    """The installed engine, unmodified: this interpreter, no overlay."""
    return EngineEnv("installed", "installed", sys.executable, tree_hash, (), default_engine_vars(device))
