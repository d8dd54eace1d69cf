"""Many candidate fixes of one bug against one base (`infercheck validate A.patch B.patch …` or a
folder of patches): each candidate a full validate run in its own report folder, all in one prompt
draw, so the base's engine groups and their reference scoring run for the first candidate and every
later one reuses them from the content-addressed cache (run/cache.py); then a page ranking the
candidates, verdict first, then evidence (docs/design.md, "Many candidates").
"""

from __future__ import annotations

import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from infercheck.errors import InfercheckError
from infercheck.names import Headline
from infercheck.options import ValidateOptions
from infercheck.records import ValidationRun
from infercheck.report.files import REPORT_FILES, json_text, write_texts
from infercheck.report.html import HARNESS_ERROR, render_candidates

Progress = Callable[[str], None]
# validate(options) -> (run, report folder); the CLI passes the real pipeline.
Validator = Callable[[ValidateOptions], tuple[ValidationRun, Path]]
INPUT_ERROR, HARNESS_FAILURE = "ERROR:input", "ERROR:harness"
PATCH_SUFFIXES = (".patch", ".diff")
CANDIDATES_JSON = "candidates.json"
# Best first: the verdicts' own precedence (names.Headline) read from the least severe, a fix that
# resolves the symptom ahead of a patch that merely regresses nothing.
RANKED_HEADLINES = (Headline.RESOLVED, Headline.CLEAN, Headline.INCONCLUSIVE, Headline.WORKAROUND,
                    Headline.SYMPTOM_ONLY, Headline.COLLATERAL, Headline.NOT_FIXED, Headline.ERROR)


@dataclass
class Attempt:
    """One validate that may not have produced a run: the headline it got (ERROR:input for bad
    input, ERROR:harness for a harness failure, whose traceback lands in the folder)."""

    got: str
    folder: Path
    run: ValidationRun | None = None
    error: str = ""


def attempt(validate: Validator, opts: ValidateOptions, folder: Path, progress: Progress, label: str) -> Attempt:
    """validate(opts), where one candidate's bad input or a harness failure on it is recorded and
    the caller goes on with the next."""
    try:
        run, folder = validate(opts)
        return Attempt(run.verdict.headline, folder, run)
    except InfercheckError as exc:  # bad input in one candidate must not lose the others' results
        progress(f"{label}: {exc}")
        return Attempt(INPUT_ERROR, folder, error=str(exc))
    except Exception as exc:  # a harness bug on one candidate: recorded, the others go on
        folder.mkdir(parents=True, exist_ok=True)
        (folder / HARNESS_ERROR).write_text(traceback.format_exc())
        message = f"harness failure {type(exc).__name__}: {exc}".splitlines()[0]
        progress(f"{label}: {message}")
        return Attempt(HARNESS_FAILURE, folder, error=message)


@dataclass
class CandidateRow:
    """One candidate's standing: its verdict and the evidence the ranking reads."""

    patch: str  # as given
    verdict: str
    exit_code: int
    report: str  # its report folder, relative to the candidates folder
    elapsed_s: float
    regressions: list[str] = field(default_factory=list)  # checks that pass on base and fail on patched
    failing: list[str] = field(default_factory=list)  # checks that fail on patched
    flags: list[str] = field(default_factory=list)  # "CODE: message" of each verdict flag
    rank: int = 0

    def order(self) -> tuple[Any, ...]:
        """Verdict, then fewer regressions, fewer failing checks, fewer flags, then the name."""
        headline = self.verdict.split(":")[0]
        position = next((i for i, h in enumerate(RANKED_HEADLINES) if h == headline), len(RANKED_HEADLINES))
        return position, len(self.regressions), len(self.failing), len(self.flags), self.patch


def candidate_row(patch: Path, tried: Attempt, out: Path, elapsed_s: float) -> CandidateRow:
    folder = str(tried.folder.relative_to(out)) if tried.folder.is_relative_to(out) else str(tried.folder)
    if tried.run is None:
        return CandidateRow(str(patch), tried.got, 2 if tried.got == INPUT_ERROR else 1, folder, elapsed_s,
                            flags=[f"{tried.got}: {tried.error}"])
    checks = tried.run.checks
    return CandidateRow(str(patch), tried.got, tried.run.verdict.exit_code, folder, elapsed_s,
                        regressions=[c.name for c in checks if c.base.passed is True and c.patched.passed is False],
                        failing=[c.name for c in checks if c.patched.passed is False],
                        flags=[f"{f.code}: {f.message}" for f in tried.run.verdict.flags])


def ranked(rows: list[CandidateRow]) -> list[CandidateRow]:
    """Best first, each with its 1-based rank (equal evidence, equal rank: ties are said, not broken by name)."""
    out = sorted(rows, key=CandidateRow.order)
    for i, row in enumerate(out):
        same = i > 0 and row.order()[:-1] == out[i - 1].order()[:-1]
        row.rank = out[i - 1].rank if same else i + 1
    return out


@dataclass
class CandidatesResult:
    rows: list[CandidateRow]  # ranked
    wall_s: float
    seed: int | None
    base: str  # what every candidate was validated against, in words

    @property
    def exit_code(self) -> int:
        """The best candidate's: 0 when one passes the gate (a person picks among the candidates)."""
        return min((r.exit_code for r in self.rows), default=2)

    def as_dict(self) -> dict[str, Any]:
        return {"wall_s": self.wall_s, "seed": self.seed, "base": self.base, "exit_code": self.exit_code,
                "candidates": [asdict(r) for r in self.rows]}


def patch_files(paths: list[Path]) -> list[Path]:
    """The patches named, a folder standing for its *.patch and *.diff files (sorted); each one
    once. A path that is neither, or a folder with none, is bad input."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in PATCH_SUFFIXES)
            if not inside:
                raise InfercheckError(f"no *.patch or *.diff files in {path}")
            found += inside
        elif path.is_file():
            found.append(path)
        else:
            raise InfercheckError(f"patch not found: {path}")
    first: dict[Path, Path] = {}
    for path in found:
        first.setdefault(path.resolve(), path)  # each file once, as it was first named
    return list(first.values())


def folder_names(patches: list[Path]) -> list[str]:
    """A report folder name per patch: its stem, made unique with its parent's name where stems repeat."""
    stems = [p.stem for p in patches]
    names = [s if stems.count(s) == 1 else f"{p.parent.name}-{s}" for p, s in zip(patches, stems)]
    return [n if names.count(n) == 1 else f"{n}-{i}" for i, n in enumerate(names, 1)]


def validate_candidates(patches: list[Path], out: Path, options: Callable[[Path, Path], ValidateOptions],
                        validate: Validator, progress: Progress, base: str) -> CandidatesResult:
    """Validate each patch into out/<name>/ with options(patch, folder) (one seed for all), then rank."""
    started = time.time()
    rows, seed = [], None
    for i, (patch, name) in enumerate(zip(patches, folder_names(patches)), 1):
        progress(f"candidate [{i}/{len(patches)}] {patch}")
        t0 = time.time()
        opts = options(patch, out / name)
        seed = opts.seed
        tried = attempt(validate, opts, out / name, progress, f"candidate {patch}")
        row = candidate_row(patch, tried, out, round(time.time() - t0, 1))
        progress(f"candidate {patch}: {row.verdict} in {row.elapsed_s:.0f}s")
        rows.append(row)
    return CandidatesResult(ranked(rows), round(time.time() - started, 1), seed, base)


def ranking_text(result: CandidatesResult) -> str:
    """The ranking as plain lines, for the terminal."""
    lines = [f"{len(result.rows)} candidate(s) against {result.base}, best first:"]
    for row in result.rows:
        evidence = (f"{len(row.regressions)} regression(s), {len(row.failing)} failing check(s), "
                    f"{len(row.flags)} flag(s)")
        lines.append(f"  {row.rank}. {row.verdict:<16} {row.patch}  ({evidence}; {row.elapsed_s:.0f}s) → {row.report}")
    return "\n".join(lines)


def write_candidates(result: CandidatesResult, out: Path) -> dict[str, Path]:
    """candidates.json and index.html (the ranking, each candidate linking its report)."""
    return write_texts(out, {"json": (CANDIDATES_JSON, json_text(result.as_dict())),
                             "html": (REPORT_FILES["html"], render_candidates(result))})
