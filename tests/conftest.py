"""Shared fixtures. Every test gets its own cache folder so nothing touches the user's cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

PATCH_DIR = Path(__file__).parent / "data" / "patches"


@pytest.fixture(scope="session")
def session_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("infercheck-cache")


@pytest.fixture(autouse=True)
def isolated_cache(session_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("INFERCHECK_CACHE", str(session_cache))
    monkeypatch.delenv("INFERCHECK_DEVICE", raising=False)
    return session_cache


@pytest.fixture
def patch_dir() -> Path:
    return PATCH_DIR


def cli_env(cache: Path) -> dict[str, str]:
    return {**os.environ, "INFERCHECK_CACHE": str(cache)}
