"""index.html for one run and the reports index, from jinja2 templates (autoescaped)."""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from infercheck.names import UNDECIDED_FLAGS, CheckKind, Variant
from infercheck.records import ValidationRun
from infercheck.report import figures, labels, view
from infercheck.run.sandbox import describe

TEMPLATES = Path(__file__).parent / "templates"
# Check kinds with a section of their own; the generic "Checks" details skip them.
SECTION_KINDS = {CheckKind.APP: "apps", CheckKind.ORACLE: "apps", CheckKind.STATIC: "static",
                 CheckKind.CODE_PATH: "code-path"}
EXAMPLE_KEYS = ("request", "position", "engine_token", "reference_token", "context", "engine_text",
                "reference_text")


def diff_lines(text: str) -> list[tuple[str, str]]:
    """(css class, line) for each line of a unified diff."""
    out = []
    for line in text.splitlines():
        if line.startswith(("+++", "---", "diff ", "index ")):
            cls = "meta"
        elif line.startswith("@@"):
            cls = "hunk"
        else:
            cls = {"+": "add", "-": "del"}.get(line[:1], "ctx")
        out.append((cls, line))
    return out


def data_v(value: Any) -> str:
    """A sort key for a table cell's data-v attribute (_table.js): empty when missing."""
    return "" if value is None else str(value)


def cell_id(expected: str, got: str) -> str:
    """The bench page's anchor of one confusion-matrix cell: cell-EXPECTED-GOT, URL-safe."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", f"cell-{expected}-{got}")


def example_columns(examples: list[dict[str, Any]]) -> list[str]:
    """The known keys in reading order, then any others in first-seen order."""
    seen = list(dict.fromkeys(k for ex in examples for k in ex))
    return [k for k in EXAMPLE_KEYS if k in seen] + [k for k in seen if k not in EXAMPLE_KEYS]


def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(fmt=view.fmt, fmt_pass=view.fmt_pass, fmt_ci=view.fmt_ci, seconds=view.fmt_seconds,
                       rate=view.fmt_rate, verdict_class=view.verdict_class, diff_lines=diff_lines,
                       rows=lambda item: dict(view.detail_rows(item)), epoch=view.epoch_seconds, data_v=data_v)
    env.globals.update(VARIANTS=list(Variant), UNDECIDED_FLAGS=UNDECIDED_FLAGS, containment=describe, expected_matches=view.expected_matches,
                       example_columns=example_columns, SECTION_KINDS=SECTION_KINDS, cell_id=cell_id,
                       measured=labels.measured, counted=labels.counted,
                       tolerance_rows=view.tolerance_rows)
    return env


ENV = _environment()


def render_report(run: ValidationRun) -> str:
    return ENV.get_template("report.html").render(
        run=run, answers=view.answers(run), flag_messages=lambda name: view.flag_messages(run, name),
        apps=view.app_views(run), statics=view.static_views(run), code_paths=view.code_path_views(run),
        figures=figures.check_figures(run.checks), runtime_figure=figures.runtime_figure(run.checks))


def render_index(rows: list[dict[str, Any]]) -> str:
    """rows: verdict.json records, newest first, each with `href` (the run's index.html) added."""
    return ENV.get_template("index.html").render(rows=rows)


HARNESS_ERROR = "harness-error.txt"  # a bench candidate's traceback where the harness failed on it


def bench_href(got: str, report: str) -> str | None:
    """What a bench row links to: the run's report, the traceback of a harness failure (no report
    was written), nothing for bad input (no run folder)."""
    if got == "ERROR:harness":
        return f"{report}/{HARNESS_ERROR}"
    return None if got == "ERROR:input" else f"{report}/index.html"


def render_bench(result: Any) -> str:
    """The benchmark page: confusion matrix (expected × got) and one row per candidate."""
    rows = [{**r.__dict__, "matches": r.matches, "href": bench_href(r.got, r.report)} for r in result.rows]
    return ENV.get_template("bench.html").render(result=result, labels=result.labels(), matrix=result.matrix(), rows=rows,
                                                 case_seconds=result.case_seconds())


def render_candidates(result: Any) -> str:
    """The side-by-side page of a multi-candidate validate: the candidates ranked, each linking its report."""
    rows = [{**asdict(r), "href": bench_href(r.verdict, r.report)} for r in result.rows]
    return ENV.get_template("candidates.html").render(result=result, rows=rows)
