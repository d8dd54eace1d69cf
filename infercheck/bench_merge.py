"""One benchmark from several bench folders run on parts of the cases (`infercheck bench-merge`).

A full bench at a new prompt-draw seed takes longer than a working session on 2 cores, so it is run
a subset of cases at a time (`bench --cases ... --seed S`); each row is independent of the others.
The merge reads each folder's bench.json, refuses folders of different seeds or of quick and full
runs mixed, keeps one row per (case, candidate) — a later folder's row replaces an earlier one's,
so a rerun of a part supersedes it — points each row's report link at its own folder, and writes
bench.json and index.html like a single bench. Nothing in the source folders is changed.
"""

from __future__ import annotations

import json
import os
from dataclasses import fields, replace
from pathlib import Path

from infercheck.bench import BENCH_JSON, BenchResult, BenchRow
from infercheck.errors import InfercheckError

ROW_FIELDS = {f.name for f in fields(BenchRow)}


def load_bench(folder: Path) -> BenchResult:
    """A bench folder's result, read back from its bench.json (one clear error when it has none)."""
    path = folder / BENCH_JSON
    try:
        data = json.loads(path.read_text())
        rows = [BenchRow(**{k: v for k, v in row.items() if k in ROW_FIELDS}) for row in data["rows"]]
        return BenchResult(rows, float(data["wall_s"]), bool(data["reuse"]), bool(data["quick"]),
                           list(data.get("cases", [])), data.get("seed"))
    except FileNotFoundError:
        raise InfercheckError(f"bench-merge: {folder} has no {BENCH_JSON} (not a finished bench folder)") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InfercheckError(f"bench-merge: {path} is not a bench result ({exc})") from None


def merge_benches(parts: list[tuple[Path, BenchResult]], out: Path) -> BenchResult:
    """The union of the parts' rows (a later part's row replaces an earlier one's for the same case
    and candidate), report links relative to `out`; wall time is the parts' sum."""
    if not parts:
        raise InfercheckError("bench-merge: no bench folders given")
    seeds = {result.seed for _, result in parts}
    if len(seeds) > 1:
        raise InfercheckError(f"bench-merge: the folders ran different prompt draws (seeds "
                              f"{', '.join(str(s) for s in sorted(seeds, key=str))}); merge one seed at a time")
    if len({result.quick for _, result in parts}) > 1:
        raise InfercheckError("bench-merge: quick and full benches mixed; merge one kind at a time")
    rows: dict[tuple[str, str], BenchRow] = {}
    for folder, result in parts:
        for row in result.rows:
            report = row.report if Path(row.report).is_absolute() else os.path.relpath(folder / row.report, out)
            rows.pop((row.case, row.candidate), None)  # the later part's row, in the later part's order
            rows[(row.case, row.candidate)] = replace(row, report=report)
    cases = list(dict.fromkeys(case for _, result in parts for case in result.cases))
    ordered = sorted(rows.values(), key=lambda r: (cases.index(r.case) if r.case in cases else len(cases), r.case))
    return BenchResult(ordered, round(sum(result.wall_s for _, result in parts), 1),
                       all(result.reuse for _, result in parts), parts[0][1].quick, cases, seeds.pop())
