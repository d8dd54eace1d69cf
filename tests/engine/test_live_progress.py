"""Live progress with a real worker (the HF backend: the cheapest engine to start): on a terminal the
running worker has its own line under the stage lines; piped, only the stage lines."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import cli_env, infercheck

RUN = ["run", "--backend", "hf", "--prompt", "12+34=", "--prompt", "5+7="]


def on_a_terminal(cache, args: list[str], timeout_s: float = 300) -> tuple[int, str]:
    """The CLI with stderr on a pseudo-terminal: (exit code, everything the terminal was sent)."""
    leader, follower = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "infercheck.cli", *args], stdout=subprocess.DEVNULL,
                            stderr=follower, env={**cli_env(cache), "TERM": "xterm-256color", "COLUMNS": "120"})
    os.close(follower)
    screen = bytearray()
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the last writer closed the terminal
            break
        if not chunk:
            break
        screen += chunk
    os.close(leader)
    return proc.wait(timeout=timeout_s), screen.decode(errors="replace")


@pytest.mark.engine
def test_a_terminal_shows_the_running_worker_and_a_pipe_only_stage_lines(isolated_cache):
    code, screen = on_a_terminal(isolated_cache, RUN)
    assert code == 0, screen
    assert "run hf · " in screen  # the live line: starting, then group 1/1 cli
    assert "[infercheck] done in" in screen
    piped = infercheck(isolated_cache, *RUN, timeout=300)
    assert piped.returncode == 0, piped.stderr
    assert "run hf · " not in piped.stderr and "\x1b[" not in piped.stderr
    assert [ln for ln in piped.stderr.splitlines() if ln.strip()] == \
        [ln for ln in piped.stderr.splitlines() if ln.startswith("[infercheck] ")]
