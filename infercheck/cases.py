"""Bundled cases: patches/<id>/case.yaml — a bug patch, a symptom spec, candidate fixes with
expected verdicts. `--case DIR` takes the base patches, model and symptom from here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from infercheck.errors import InfercheckError
from infercheck.specs import Candidate, Case
from infercheck.yamlio import parse_record, read_yaml

__all__ = ["Candidate", "Case", "load_case"]


@dataclass(frozen=True)
class CandidateFile:
    name: str
    patch: str
    expected: str
    why: str = ""
    quick: bool = False


@dataclass(frozen=True)
class CaseFile:
    """case.yaml as written; paths relative to the case folder."""

    candidates: tuple[CandidateFile, ...]
    id: str | None = None
    model: str = "tiny-llama-add"
    base_patches: tuple[str, ...] = ()
    symptom: str | None = None
    suites: tuple[str, ...] = ()
    apps: tuple[str, ...] | None = None
    area: str = ""
    bug: str = ""


def load_case(folder: Path) -> Case:
    folder = Path(folder)
    path = folder / "case.yaml"
    if not path.is_file():
        raise InfercheckError(f"not a case folder (no case.yaml): {folder}")
    spec = parse_record(CaseFile, read_yaml(path), path)
    candidates = tuple(Candidate(c.name, folder / c.patch, c.expected, c.why, c.quick) for c in spec.candidates)
    symptom = folder / spec.symptom if spec.symptom else None
    base = tuple(folder / p for p in spec.base_patches)
    for file in [*base, *(c.patch for c in candidates), *([symptom] if symptom else [])]:
        if not file.is_file():
            raise InfercheckError(f"{path} names a missing file: {file}")
    return Case(spec.id or folder.name, folder, spec.model, base, symptom, candidates, spec.suites, spec.apps,
                spec.area, spec.bug)
