"""Where things live: the repository's data folders and the user's cache."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SUITES_DIR = REPO_ROOT / "suites"
MODELS_DIR = SUITES_DIR / "models"
DATA_DIR = SUITES_DIR / "data"
PATCHES_DIR = REPO_ROOT / "patches"
REPORTS_DIR = REPO_ROOT / "reports"


def reports_dir() -> Path:
    """Where validate writes reports: $INFERCHECK_REPORTS, else reports/ in the repository."""
    return Path(os.environ.get("INFERCHECK_REPORTS") or REPORTS_DIR).expanduser()


def cache_dir() -> Path:
    """The cache root: $INFERCHECK_CACHE, else ~/.cache/infercheck."""
    root = os.environ.get("INFERCHECK_CACHE") or str(Path.home() / ".cache" / "infercheck")
    path = Path(root).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path
