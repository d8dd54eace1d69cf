"""The bundled general-text corpus (suites/data/general-text/): original ASCII passages that any
tokenizer carries, the source of the general-text prompt set and of the random models' tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

from infercheck.errors import InfercheckError
from infercheck.paths import DATA_DIR

GENERAL_TEXT = DATA_DIR / "general-text" / "passages.jsonl"


def general_passages(path: Path = GENERAL_TEXT) -> list[str]:
    try:
        return [json.loads(line)["text"] for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError, KeyError) as e:
        raise InfercheckError(f"{path}: the general-text corpus is unreadable ({e})") from None
