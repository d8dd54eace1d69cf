"""The environment variables the unmodified engine reads, found in its source: a patch that reads
another one may be looking for the harness (checks/static_signals.py, "reads_foreign_environment")."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from infercheck.build.tree import find_installed_engine
from infercheck.env_reads import ENV_READ
from infercheck.errors import InfercheckError

ENV_TABLE = re.compile(r"""^\s*["'](\w+)["']\s*:\s*lambda""", re.MULTILINE)  # vLLM's envs.py: name -> reader


@functools.lru_cache(maxsize=4)
def engine_environment(package_dir: Path) -> frozenset[str]:
    """Every variable name the package's Python source reads from the environment, found as the
    static sign finds a patch's reads (ENV_READ), plus vLLM's envs.py table of lambdas."""
    names: set[str] = set()
    for path in package_dir.rglob("*.py"):
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        names.update(n for pattern in (ENV_READ, ENV_TABLE) for m in pattern.finditer(text) for n in m.groups() if n)
    return frozenset(names)


def installed_engine_environment() -> frozenset[str] | None:
    """The installed engine's variables; None where no engine is installed here."""
    try:
        return engine_environment(find_installed_engine().package_dir)
    except InfercheckError:
        return None
