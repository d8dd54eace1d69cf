"""Shared fixtures. Every test gets its own cache folder so nothing touches the user's cache."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.browser import in_ci

PATCH_DIR = Path(__file__).parent / "data" / "patches"
# The test session's prompt draw (infercheck/draw.py): not the identity draw, so every engine test
# judges instances of the distributions that no bundled file names.
TEST_SEED = 20261205


@pytest.fixture(scope="session")
def session_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("infercheck-cache")


@pytest.fixture(autouse=True)
def isolated_cache(session_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("INFERCHECK_CACHE", str(session_cache))
    monkeypatch.setenv("INFERCHECK_SEED", str(TEST_SEED))  # one prompt draw for the session: cached groups are shared
    monkeypatch.delenv("INFERCHECK_DEVICE", raising=False)
    return session_cache


@pytest.fixture
def patch_dir() -> Path:
    return PATCH_DIR


def ray_or_skip() -> None:
    """Without Ray a --ray test skips with the reason; under CI=true it fails (it must not pass by not running)."""
    if importlib.util.find_spec("ray") is None:
        reason = "the --ray tests need Ray (pip install -e '.[ray]'; `make setup` installs it)"
        if in_ci():
            pytest.fail(reason)
        pytest.skip(reason)


RAY_CANNOT_START = "Ray could not start or connect"  # run/ray_pool.py's error where this machine refuses Ray


def skip_where_ray_cannot_start(error: str) -> None:
    """Where Ray itself cannot run on this machine (not a fault of ours), the test is skipped with
    Ray's own error as the reason: shown in the summary, never silent."""
    line = next((ln for ln in error.splitlines() if RAY_CANNOT_START in ln), "")
    if line:
        pytest.skip(line)


def cli_env(cache: Path) -> dict[str, str]:
    """The CLI's environment: its own cache, and the session's prompt draw also where no per-test
    fixture set it (a module-scoped fixture runs outside them), so cached groups are shared."""
    return {"INFERCHECK_SEED": str(TEST_SEED), **os.environ, "INFERCHECK_CACHE": str(cache)}


def infercheck(cache: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """The CLI in a subprocess, with its own cache folder."""
    return subprocess.run([sys.executable, "-m", "infercheck.cli", *args], capture_output=True, text=True,
                          env=cli_env(cache), timeout=timeout)


def assert_one_line_error(proc: subprocess.CompletedProcess, code: int, fragment: str) -> None:
    """Bad input ends as exactly one `infercheck: error:` line naming it, the exit code, no traceback."""
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("infercheck: error:")]
    assert len(errors) == 1 and fragment in errors[0], proc.stderr


def gone_within(pid: int, timeout_s: float) -> bool:
    """Whether the process ends (or is a zombie) within timeout_s."""
    from infercheck.run.launcher import is_alive

    deadline = time.time() + timeout_s
    while is_alive(pid) and time.time() < deadline:
        time.sleep(0.1)
    return not is_alive(pid)
