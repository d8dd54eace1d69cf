"""summary.md: short enough for a PR comment — verdict, the three questions, a table, how to reproduce."""

from __future__ import annotations

import re

from infercheck.checks.records import VARIANTS, ValidationRun
from infercheck.report.view import answers, expected_matches, fmt_seconds, observation_cell

STATUS_WORD = {"good": "ok", "warn": "check", "bad": "problem", "na": "n/a"}


def _cell(text: str) -> str:
    """One table cell: no line breaks, no pipes, no raw HTML."""
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("|", "\\|").replace("\r", " ").replace("\n", " "))


def _code_block(text: str) -> str:
    fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
    return f"{fence}bash\n{text}\n{fence}"


def render_summary(run: ValidationRun) -> str:
    v = run.verdict
    head = f"### infercheck: **{v.headline}**, {_cell(run.patch.name)}"
    matches = expected_matches(run.expected, v.headline)
    if matches is not None:
        head += f" (expected {run.expected}: {'matches' if matches else '**MISMATCH**'})"
    lines = [head, "", f"{run.model} · {run.dtype} · {run.device} · {run.engine} · "
             f"{fmt_seconds(run.elapsed_s)} · exit code {v.exit_code}", ""]
    lines += [f"- **{a.question}** {_cell(a.line)} _({STATUS_WORD[a.status]})_" for a in answers(run)]
    if v.flags:
        lines += ["", "Flags: " + "; ".join(_cell(f"{f.code} ({f.check or 'run'}): {f.message}") for f in v.flags)]
    if run.checks:
        lines += ["", "| check | kind | base | patched | reference | flags |", "|---|---|---|---|---|---|"]
        lines += [f"| {_cell(c.name)} | {c.kind} | " + " | ".join(_cell(observation_cell(c, x)) for x in VARIANTS)
                  + f" | {_cell(', '.join(c.flags)) or '—'} |" for c in run.checks]
    lines += ["", "Reproduce:", "", _code_block(run.command), ""]
    return "\n".join(lines)
