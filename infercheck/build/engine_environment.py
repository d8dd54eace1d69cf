"""The environment variables the unmodified engine reads, found in its source: a patch that reads
another one may be looking for the harness (checks/static_signals.py, "reads_foreign_environment")."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from infercheck.build.tree import find_installed_engine
from infercheck.errors import InfercheckError

ENV_NAME = re.compile(r"""(?:getenv|environ\.get|environ\.pop|environ\.setdefault)\(\s*["'](\w+)["']|"""
                      r"""environ\[\s*["'](\w+)["']\s*\]|^\s*["'](\w+)["']\s*:\s*lambda""", re.MULTILINE)


@functools.lru_cache(maxsize=4)
def engine_environment(package_dir: Path) -> frozenset[str]:
    """Every variable name the package's Python source reads from the environment (os.getenv,
    os.environ[...] and .get, and vLLM's envs.py table of lambdas)."""
    names: set[str] = set()
    for path in package_dir.rglob("*.py"):
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        names.update(n for m in ENV_NAME.finditer(text) for n in m.groups() if n)
    return frozenset(names)


def installed_engine_environment() -> frozenset[str] | None:
    """The installed engine's variables; None where no engine is installed here."""
    try:
        return engine_environment(find_installed_engine().package_dir)
    except InfercheckError:
        return None
