"""The bundled benchmark: validate every candidate of every case under patches/, compare each verdict
with the case's expectation, and summarise as a confusion matrix (expected × got) with timings.

Base and reference results come from the per-group cache (infercheck.run.cache), so a case's
base engine groups and their reference scoring run once for all of its candidates.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from infercheck.candidates import Progress, Validator, attempt
from infercheck.cases import Candidate, Case, load_case
from infercheck.errors import InfercheckError
from infercheck.names import CheckKind, Headline
from infercheck.options import ValidateOptions
from infercheck.pipeline import RUNS
from infercheck.records import ValidationRun
from infercheck.report.files import REPORT_FILES, json_text, write_texts
from infercheck.report.html import render_bench
from infercheck.report.view import expected_matches
from infercheck.run.cancel import Cancel, results_or_cancel
from infercheck.run.store import RunOutcome

# The bug check of a case: its bug.patch validated against the clean engine with the case's symptom.
BUG = "bug"
REPRODUCED = "REPRODUCED"
BENCH_JSON = "bench.json"  # a bench folder's rows and matrix (bench_merge reads it back)


@dataclass
class BenchRow:
    case: str
    candidate: str
    expected: str
    got: str
    elapsed_s: float
    report: str  # the candidate's report folder, relative to the bench folder
    why: str = ""

    @property
    def matches(self) -> bool:
        return bool(expected_matches(self.expected, self.got))


@dataclass
class BenchResult:
    rows: list[BenchRow]
    wall_s: float
    reuse: bool
    quick: bool
    cases: list[str] = field(default_factory=list)
    seed: int | None = None  # the prompt draw every candidate ran with

    @property
    def mismatches(self) -> list[BenchRow]:
        return [r for r in self.rows if not r.matches]

    def case_seconds(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for row in self.rows:
            out[row.case] = round(out.get(row.case, 0.0) + row.elapsed_s, 2)
        return out

    def matrix(self) -> dict[str, dict[str, int]]:
        return confusion(self.rows)

    def labels(self) -> list[str]:
        return verdict_labels(self.rows)

    def as_dict(self) -> dict[str, Any]:
        return {"wall_s": self.wall_s, "reuse": self.reuse, "quick": self.quick, "cases": self.cases, "seed": self.seed,
                "correct": len(self.rows) - len(self.mismatches), "total": len(self.rows),
                "matrix": self.matrix(), "case_seconds": self.case_seconds(),
                "rows": [{**asdict(r), "matches": r.matches} for r in self.rows]}


def confusion(rows: list[BenchRow]) -> dict[str, dict[str, int]]:
    """expected -> got -> count (an ERROR:<stage> headline counts under its full name)."""
    out: dict[str, dict[str, int]] = {}
    for row in rows:
        out.setdefault(row.expected, {})
        out[row.expected][row.got] = out[row.expected].get(row.got, 0) + 1
    return out


def verdict_labels(rows: list[BenchRow]) -> list[str]:
    """Every verdict that appears, expected or got: the matrix's columns."""
    return sorted({r.expected for r in rows} | {r.got for r in rows})


def matrix_text(rows: list[BenchRow]) -> str:
    matrix = confusion(rows)
    labels = verdict_labels(rows)
    width = max([len(x) for x in labels] + [len("expected \\ got")])
    lines = [" ".join(["expected \\ got".ljust(width), *(x.rjust(len(x)) for x in labels)])]
    for exp in sorted(matrix):
        cells = [str(matrix[exp].get(got, 0) or ".").rjust(len(got)) for got in labels]
        lines.append(" ".join([exp.ljust(width), *cells]))
    return "\n".join(lines)


def load_cases(root: Path, ids: list[str] | None) -> list[Case]:
    if not Path(root).is_dir():
        raise InfercheckError(f"not a folder of cases: {root}")
    cases = [load_case(d) for d in sorted(Path(root).iterdir()) if (d / "case.yaml").is_file()]
    if not cases:
        raise InfercheckError(f"no cases (folders with case.yaml) under {root}")
    if ids:
        known = {c.id: c for c in cases}
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise InfercheckError(f"unknown case(s) {', '.join(unknown)} (known: {', '.join(known)})")
        cases = [known[i] for i in ids]
    return cases


def selected(case: Case, quick: bool, bug_checks: bool) -> list[Candidate]:
    """The bug check (when asked and the case has a bug patch and a symptom), then the candidates."""
    chosen = [c for c in case.candidates if c.quick or not quick]
    if bug_checks and chosen and len(case.base_patches) == 1 and case.symptom is not None:
        chosen.insert(0, Candidate(BUG, case.base_patches[0], REPRODUCED,
                                   "the bug on the clean engine: the symptom passes there and fails with the bug"))
    return chosen


def bug_outcome(run: ValidationRun) -> str:
    """REPRODUCED when the symptom check passes on the clean engine and fails with the bug."""
    symptom = next((c for c in run.checks if c.kind == CheckKind.SYMPTOM), None)
    if symptom is None:
        return run.verdict.headline if run.verdict.headline.startswith(Headline.ERROR) else "NO_SYMPTOM_CHECK"
    if not symptom.base.passed:
        return "FAILS_ON_CLEAN_ENGINE"
    return REPRODUCED if symptom.patched.passed is False else "NO_EFFECT"


def run_bench(cases: list[Case], out: Path, options: Callable[[Case, Candidate, Path], ValidateOptions],
              validate: Validator, progress: Progress, reuse: bool = True, quick: bool = False,
              bug_checks: bool = True, seed: int | None = None, streams: int = 1,
              cancel: Cancel | None = None) -> BenchResult:
    """Validate each selected candidate into out/<case>/<candidate>/ and collect the verdicts. A
    case's bug check (candidate "bug") validates its bug.patch on the clean engine: `options`
    gets that pseudo-candidate and must drop the case's base patches for it. Up to `streams`
    candidates run side by side (`rows_side_by_side`), each case's first one before its others;
    the workers of all share the machine's slots (run/slots.py). `validate` must run its workers
    under `cancel`: an interruption stops every stream's."""
    started = time.time()
    chosen = [(case, cand) for case in cases for cand in selected(case, quick, bug_checks)]
    if not chosen:
        raise InfercheckError("no candidates selected (a --quick run takes only candidates marked `quick: true`)")
    numbered = list(enumerate(chosen, 1))
    by_case = [items for case in cases if (items := [item for item in numbered if item[1][0].id == case.id])]
    cancel = cancel or Cancel()

    def run_row(item: Numbered) -> tuple[int, BenchRow]:
        cancel.raise_if_set()  # another stream was interrupted: start no further candidate
        i, (case, cand) = item
        return i, bench_row(case, cand, i, len(chosen), out, options, validate, progress)

    if streams > 1 and len(numbered) > 1:
        done = rows_side_by_side(by_case, run_row, streams, cancel)
    else:
        done = [run_row(item) for items in by_case for item in items]
    rows = [row for _, row in sorted(done, key=lambda item: item[0])]
    return BenchResult(rows, round(time.time() - started, 1), reuse, quick, [c.id for c in cases], seed)


Numbered = tuple[int, tuple[Case, Candidate]]  # a chosen candidate and its place in the bench


def rows_side_by_side(by_case: list[list[Numbered]], run_row: Callable[[Numbered], Any], streams: int,
                      cancel: Cancel) -> list[Any]:
    """run_row over every case's candidates, `streams` at a time, each case's first candidate
    before its others: the first computes the case's base, reference and noise floor, which the
    others then read from the cache, so they can run side by side with each other and with other
    cases' (a case's candidates one after another left a slot idle behind its slowest case)."""
    with ThreadPoolExecutor(max_workers=streams) as rows, ThreadPoolExecutor(max_workers=len(by_case)) as cases:
        def one_case(items: list[Numbered]) -> list[Any]:
            first = rows.submit(run_row, items[0]).result()
            return [first, *(f.result() for f in [rows.submit(run_row, item) for item in items[1:]])]

        futures = [cases.submit(one_case, items) for items in by_case]
        return [row for case_rows in results_or_cancel(futures, cancel) for row in case_rows]


def bench_row(case: Case, cand: Candidate, i: int, total: int, out: Path,
              options: Callable[[Case, Candidate, Path], ValidateOptions], validate: Validator,
              progress: Progress) -> BenchRow:
    """One candidate validated into out/<case>/<candidate>/ and its row."""
    folder = out / case.id / cand.name
    progress(f"bench [{i}/{total}] {case.id}/{cand.name} (expected {cand.expected})")
    t0 = time.time()
    tried = attempt(validate, options(case, cand, folder), folder, progress, f"bench {case.id}/{cand.name}")
    got = bug_outcome(tried.run) if tried.run is not None and cand.name == BUG else tried.got
    folder = tried.folder
    row = BenchRow(case.id, cand.name, cand.expected, got, round(time.time() - t0, 1),
                   str(folder.relative_to(out)) if folder.is_relative_to(out) else str(folder), cand.why)
    progress(f"bench {case.id}/{cand.name}: {got} ({'as expected' if row.matches else 'MISMATCH'}) "
             f"in {row.elapsed_s:.0f}s{reused_note(folder)}")
    return row


def reused_note(folder: Path) -> str:
    """", 12 group(s) reused from cache" where the run reused finished work (a rerun of an
    interrupted bench says what it did not redo)."""
    try:
        reused = sum(w.reused_groups for w in RunOutcome.load(folder / RUNS).workers.values())
    except InfercheckError:
        return ""
    return f", {reused} group(s) reused from cache" if reused else ""


def write_bench(result: BenchResult, out_dir: Path) -> dict[str, Path]:
    """bench.json and index.html (confusion matrix, one row per candidate linking to its report)."""
    return write_texts(out_dir, {BENCH_JSON: (BENCH_JSON, json_text(result.as_dict())),
                                 "index.html": (REPORT_FILES["html"], render_bench(result))})
