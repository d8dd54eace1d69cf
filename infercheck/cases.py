"""Bundled cases: patches/<id>/case.yaml — a bug patch, a symptom spec, candidate fixes with
expected verdicts. `--case DIR` takes the base patches, model and symptom from here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from infercheck.errors import InfercheckError
from infercheck.suites import read_yaml


@dataclass(frozen=True)
class Candidate:
    name: str
    patch: Path
    expected: str
    why: str  # one line: what measurement shows it
    quick: bool = False  # in the fast subset `infercheck bench --quick` (and CI) runs


@dataclass(frozen=True)
class Case:
    id: str
    folder: Path
    model: str
    base_patches: tuple[Path, ...]
    symptom: Path | None
    candidates: tuple[Candidate, ...]
    suites: tuple[str, ...] = ()
    apps: tuple[str, ...] | None = None  # None: the neighbour map decides per candidate
    area: str = ""  # the code area the bug lives in (one per case in the bundled benchmark)

    def candidate_for(self, patch: Path) -> Candidate | None:
        resolved = Path(patch).resolve()
        return next((c for c in self.candidates if c.patch.resolve() == resolved), None)


def load_case(folder: Path) -> Case:
    folder = Path(folder)
    if not (folder / "case.yaml").is_file():
        raise InfercheckError(f"not a case folder (no case.yaml): {folder}")
    data = read_yaml(folder / "case.yaml")
    try:
        candidates = tuple(Candidate(c["name"], folder / c["patch"], c["expected"], c.get("why", ""),
                                     bool(c.get("quick", False)))
                           for c in data.get("candidates") or [])
        symptom = folder / data["symptom"] if data.get("symptom") else None
        base = tuple(folder / p for p in data.get("base_patches") or [])
    except KeyError as exc:
        raise InfercheckError(f"{folder / 'case.yaml'}: missing key {exc}") from None
    for path in [*base, *(c.patch for c in candidates), *([symptom] if symptom else [])]:
        if not path.is_file():
            raise InfercheckError(f"{folder / 'case.yaml'} names a missing file: {path}")
    return Case(str(data.get("id", folder.name)), folder, str(data.get("model", "tiny-llama-add")), base, symptom,
                candidates, tuple(data.get("suites") or ()),
                tuple(data["apps"]) if data.get("apps") is not None else None, str(data.get("area", "")))
