"""The position oracle's variants and buckets (docs/design.md, "Oracles"): config-only copies of the
bundled models (models/config_variants.py), each on an engine of its own per op dispatch (vLLM's
own kernels and the PyTorch forward_native), each given one prompt that reaches the last position
bucket its context allows; every prompt position is scored.

The workload (suites/oracles/positions.yaml) lists the variants as data: a bundled model and the
config keys it sets over the workload's `common` edits. Position buckets are upper bounds
(`buckets: [256, 2048, 4096, 8192]`): position p (0-based, the token whose logprob is scored) falls
in the first bucket b with p < b. The prompt is packed few-shot addition text, the bundled models'
own distribution, so the logprobs hang on attention that needs the right relative positions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infercheck.errors import InfercheckError
from infercheck.models import zoo
from infercheck.models.config_variants import ConfigVariant, variant_folder

DEFAULT_BUCKETS = (256, 2048, 4096, 8192)
# Which implementation of vLLM's CustomOps (rotary, RMSNorm, activations) runs: the eager engine's
# own kernels (forward_cpu on this build), or the PyTorch reference forward_native that the CPU
# build runs whenever custom ops are off — its default compiled mode, or `custom_ops: ["none"]`.
# Both are the same op and must agree with the reference; each variant runs under every dispatch.
DISPATCHES: dict[str, dict[str, Any]] = {
    "custom": {},
    "native": {"compilation_config": {"custom_ops": ["none"]}},
}


@dataclass(frozen=True)
class PositionVariant:
    variant: ConfigVariant
    max_model_len: int  # the engine's context: min(the variant's max_position_embeddings, the last bucket)
    prompt_tokens: int  # max_model_len less room for the generated tokens
    dispatches: tuple[str, ...] = tuple(DISPATCHES)  # the op dispatches it runs under

    @property
    def name(self) -> str:
        return self.variant.name

    def folder(self, root: Path | None = None) -> Path:
        return variant_folder(self.variant, zoo.model_dir(self.variant.model), root)


def dispatches(spec: dict[str, Any], default: tuple[str, ...] = tuple(DISPATCHES)) -> tuple[str, ...]:
    """A workload's or a variant's `dispatch:` list (default: every dispatch)."""
    names = tuple(spec.get("dispatch") or default)
    unknown = [d for d in names if d not in DISPATCHES]
    if unknown:
        raise InfercheckError(f"unknown op dispatch {', '.join(unknown)} (known: {', '.join(DISPATCHES)})")
    return names


def set_name(variant: str, dispatch: str) -> str:
    """The request set of a variant under a dispatch: "yarn-4" (custom ops), "yarn-4~native"."""
    return variant if dispatch == "custom" else f"{variant}~{dispatch}"


def buckets(workload: dict[str, Any]) -> tuple[int, ...]:
    out = tuple(int(b) for b in workload.get("buckets") or DEFAULT_BUCKETS)
    if not out or list(out) != sorted(set(out)) or out[0] <= 0:
        raise InfercheckError(f"position buckets must be increasing positive bounds, got {list(out)}")
    return out


def bucket_of(position: int, bounds: tuple[int, ...]) -> int | None:
    """The bucket bound position falls under (position < bound), None past the last."""
    return next((b for b in bounds if position < b), None)


def bucket_name(bound: int) -> str:
    return f"≤{bound}"


def variants(workload: dict[str, Any]) -> list[PositionVariant]:
    """The workload's variants in file order, each with its context and prompt length."""
    common = dict(workload.get("common") or {})
    default = dispatches(workload)
    margin = int(workload.get("max_tokens", 1)) + 1
    last = buckets(workload)[-1]
    out = []
    for name, spec in (workload.get("variants") or {}).items():
        if not isinstance(spec, dict) or spec.get("model") not in zoo.SPECS:
            raise InfercheckError(f"position variant {name}: needs `model`, one of {', '.join(zoo.SPECS)}")
        variant = ConfigVariant(str(name), str(spec["model"]), {**common, **dict(spec.get("config") or {})})
        max_pos = int(variant.config.get("max_position_embeddings")
                      or zoo.SPECS[variant.model].config["max_position_embeddings"])
        context = min(max_pos, last)
        out.append(PositionVariant(variant, context, context - margin, dispatches(spec, default)))
    if not out:
        raise InfercheckError("the position oracle needs at least one variant")
    return out
