"""Config-only variants of a model: the same weights under an edited config.json (docs/design.md,
"Oracles", the position oracle).

A variant is a bundled model plus top-level config edits (`rope_parameters`, `sliding_window`,
`max_position_embeddings`, ...). Its folder is built on the fly under the cache, named by what it
holds (the base's files and the edited config, hashed), so the same variant is built once and two
variants never share a folder; the weights are hard links to the base's files (copies where the
cache is on another file system), never committed. Building is idempotent and atomic (a folder is
renamed into place only once complete), so concurrent runs and a crash mid-build leave no half
variant behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infercheck.errors import InfercheckError
from infercheck.paths import cache_dir

CONFIG = "config.json"
MANIFEST = "manifest.json"  # the base's build record: not the variant's


@dataclass(frozen=True)
class ConfigVariant:
    name: str  # "yarn-4": unique within its oracle
    model: str  # the bundled model it edits
    config: dict[str, Any] = field(default_factory=dict)  # top-level keys set (a null value deletes)

    def edited(self, base: dict[str, Any]) -> dict[str, Any]:
        out = dict(base)
        for key, value in self.config.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = value
        return out


def variant_folder(variant: ConfigVariant, base_dir: Path, root: Path | None = None) -> Path:
    """The variant's folder under root (default: the cache's models/ folder), built if missing."""
    try:
        base_config = json.loads((base_dir / CONFIG).read_text())
    except (OSError, ValueError) as exc:
        raise InfercheckError(f"config variant {variant.name}: cannot read {base_dir / CONFIG}: {exc}") from exc
    config = variant.edited(base_config)
    files = sorted(p for p in base_dir.iterdir() if p.is_file() and p.name not in (CONFIG, MANIFEST))
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode())
    for p in files:
        digest.update(p.name.encode() + hashlib.sha256(p.read_bytes()).digest())
    target = (root or cache_dir() / "models") / f"{base_dir.name}-{variant.name}-{digest.hexdigest()[:12]}"
    if (target / CONFIG).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    staging.chmod(0o755)  # mkdtemp makes it private; workers may read it as another user
    try:
        for p in files:
            link_or_copy(p, staging / p.name)
        (staging / CONFIG).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        try:
            os.rename(staging, target)
        except OSError:  # another run built it first: theirs is the same content
            if not (target / CONFIG).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)
