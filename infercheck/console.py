"""Console helpers shared by the commands: progress lines on stderr and `K=V` engine arguments."""

from __future__ import annotations

import json
import sys
from typing import Any, Callable

from infercheck.errors import InfercheckError

Progress = Callable[[str], None]


def progress(message: str) -> None:
    print(f"[infercheck] {message}", file=sys.stderr, flush=True)


def parse_engine_arg(text: str) -> tuple[str, Any]:
    """K=V; V is read as JSON when it parses (numbers, booleans, objects), else as a string."""
    if "=" not in text:
        raise InfercheckError(f"engine arg must be KEY=VALUE, got {text!r}")
    key, raw = text.split("=", 1)
    try:
        return key.strip(), json.loads(raw)
    except json.JSONDecodeError:
        return key.strip(), raw
