"""How Python source reads an environment variable (`os.getenv("X")`, `os.environ["X"]`,
`os.environ.get("X")`, `"X" in os.environ`): one pattern for the static sign over a patch's added
lines (checks/static_signals.py) and for the scan of the engine's own variables
(build/engine_environment.py), so both count the same reads."""

from __future__ import annotations

import re

ENV_READ = re.compile(r"\b(?:getenv|environ\.get|environ\.pop|environ\.setdefault)\(\s*['\"](\w+)['\"]|"
                      r"\benviron\[\s*['\"](\w+)['\"]\s*\]|['\"](\w+)['\"]\s+(?:not\s+)?in\s+(?:os\.)?environ\b")
