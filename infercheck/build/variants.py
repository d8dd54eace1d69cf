"""Stage 3, build: the base and patched engines of a validate (docs/design.md, "Pipeline")."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from infercheck.build.builder import build_variant
from infercheck.build.engine_env import EngineEnv
from infercheck.build.tree import EngineTree, engine_tree
from infercheck.errors import BuildError
from infercheck.patch.intake import PatchFile


@dataclass
class Variants:
    """The built engines; `patched` is None when its build failed (the ERROR:build verdict).
    `unmodified` is the tree without any patch (the engine tests' platform run; base itself when
    there are no base patches)."""

    base: EngineEnv
    patched: EngineEnv | None
    build_error: str | None = None
    unmodified: EngineEnv | None = None
    tree: EngineTree | None = None

    @property
    def base_is_unmodified(self) -> bool:
        """No base patches: base is the unmodified engine itself."""
        return self.unmodified is self.base


def build_variants(engine_src: Path | None, base_patches: list[PatchFile], patch: PatchFile, device: str) -> Variants:
    """Base = tree + base patches; patched = base + the candidate. A base that does not build is bad
    input (InfercheckError, exit 2); a patched one that does not is ERROR:build."""
    tree = engine_tree(engine_src)
    base, _ = build_variant(tree, base_patches, "base", device)
    unmodified = build_variant(tree, [], "unmodified", device)[0] if base_patches else base
    try:
        patched, _ = build_variant(tree, [*base_patches, patch], "patched", device)
    except BuildError as exc:
        return Variants(base, None, str(exc), unmodified, tree)
    return Variants(base, patched, None, unmodified, tree)
