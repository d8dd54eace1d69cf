"""Writing reports: every file atomically (temp file in the same folder + rename), nothing else in
the folder touched; re-rendering from a stored results.json; the index over all runs."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any
from urllib.parse import quote

from dacite import DaciteError

from infercheck.errors import InfercheckError
from infercheck.records import ValidationRun
from infercheck.report.html import render_index, render_report
from infercheck.report.junit import render_junit
from infercheck.report.markdown import render_summary
from infercheck.report.view import epoch_seconds, verdict_record
from infercheck.run.store import atomic_write

REPORT_FILES = {"results": "results.json", "verdict": "verdict.json", "junit": "junit.xml",
                "summary": "summary.md", "html": "index.html"}
SKIP_DIRS = {"bench"}


def finite(data: Any) -> Any:
    """Strict JSON: non-finite floats (an infinite MDE, a missing logprob) become strings."""
    if isinstance(data, float) and not math.isfinite(data):
        return str(data)
    if isinstance(data, dict):
        return {k: finite(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [finite(v) for v in data]
    return data


def json_text(data: Any) -> str:
    return json.dumps(finite(data), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def write_report(run: ValidationRun, out_dir: Path) -> dict[str, Path]:
    """Write results.json, verdict.json, junit.xml, summary.md and index.html into out_dir.
    Everything is rendered before anything is written, so a rendering bug leaves no mixed report."""
    texts = {"results": json_text(run.to_dict()), "verdict": json_text(verdict_record(run)),
             "junit": render_junit(run), "summary": render_summary(run), "html": render_report(run)}
    return write_texts(out_dir, {key: (REPORT_FILES[key], text) for key, text in texts.items()})


def write_results(run: ValidationRun, out_dir: Path) -> Path:
    """results.json alone (the record of a run whose report stage's own time came after its page)."""
    return write_texts(out_dir, {"results": (REPORT_FILES["results"], json_text(run.to_dict()))})["results"]


def write_texts(out_dir: Path, texts: dict[str, tuple[str, str]]) -> dict[str, Path]:
    """key -> (file name, text), each written atomically into out_dir; returns key -> path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for key, (name, text) in texts.items():
        paths[key] = out_dir / name
        atomic_write(paths[key], text)
    return paths


def load_run(run_dir: Path) -> ValidationRun:
    path = run_dir / REPORT_FILES["results"]
    try:
        return ValidationRun.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise InfercheckError(f"no results.json in {run_dir}: not a run folder") from None
    except DaciteError as exc:
        raise InfercheckError(f"cannot read {path} (written by another infercheck version?): "
                              f"{exc}".splitlines()[0]) from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InfercheckError(f"cannot read {path}: {type(exc).__name__}: {exc}".splitlines()[0]) from None


def render_from_dir(run_dir: Path) -> dict[str, Path]:
    """Re-render every report file of a run folder from its results.json alone (no engine)."""
    return write_report(load_run(run_dir), run_dir)


def _index_row(run_dir: Path) -> dict[str, Any] | None:
    """One run's verdict.json as an index row; None when missing or unreadable."""
    try:
        data = json.loads((run_dir / REPORT_FILES["verdict"]).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("headline"), str):
        return None
    row = {k: data.get(k) for k in ("started", "patch", "case", "expected", "headline", "elapsed_s")}
    row["started"] = str(row["started"] or "")
    if not isinstance(row["elapsed_s"], (int, float)):
        row["elapsed_s"] = None
    row["folder"] = run_dir.name
    has_page = (run_dir / REPORT_FILES["html"]).is_file()
    row["href"] = f"{quote(run_dir.name)}/{REPORT_FILES['html']}" if has_page else None
    return row


def write_index(reports_root: Path) -> Path:
    """reports_root/index.html listing every run folder with a readable verdict.json, newest first
    (by the instant each started: time-zone offsets count)."""
    reports_root.mkdir(parents=True, exist_ok=True)
    runs = [d for d in reports_root.iterdir() if d.is_dir() and d.name not in SKIP_DIRS]
    rows = [row for row in map(_index_row, runs) if row is not None]
    rows.sort(key=lambda r: (epoch_seconds(r["started"]) or 0.0, r["started"], r["folder"]), reverse=True)
    path = reports_root / REPORT_FILES["html"]
    atomic_write(path, render_index(rows))
    return path
