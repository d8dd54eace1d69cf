"""summary.md: short enough for a PR comment — verdict, the three questions, a table, how to reproduce."""

from __future__ import annotations

import re

from infercheck.names import CheckFlag, Variant
from infercheck.records import ValidationRun
from infercheck.report.view import (answers, app_views, code_path_views, expected_matches, fmt_seconds,
                                    observation_cell, static_views)

MARKED_FLAGS = (CheckFlag.REGRESSED, CheckFlag.WORKAROUND, CheckFlag.GAMES_HARNESS)  # shown as markers (view._markers)
STATUS_WORD = {"good": "ok", "warn": "check", "bad": "problem", "na": "n/a"}


def _cell(text: str) -> str:
    """One table cell: no line breaks, no pipes, no raw HTML."""
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("|", "\\|").replace("\r", " ").replace("\n", " "))


def _code_block(text: str) -> str:
    fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
    return f"{fence}bash\n{text}\n{fence}"


def _apps_table(run: ValidationRun) -> list[str]:
    """One row per neighbouring application; nothing when no app ran."""
    apps = app_views(run)
    if not apps:
        return []
    lines = ["", "Neighbouring applications:", "",
             "| app | base | patched | hit rate base→patched | tokens/s base→patched | flags |",
             "|---|---|---|---|---|---|"]
    for a in apps:
        flags = ", ".join([f"**{marker}**" for marker, _ in a.markers]
                          + [f for f in a.check.flags if f not in MARKED_FLAGS]) or "—"
        lines.append(f"| {_cell(a.check.name)} | {_cell(a.status['base'].text)} | {_cell(a.status['patched'].text)} "
                     f"| {a.hit_rate} | {a.tokens_per_s} | {_cell(flags)} |")
    return lines


def _static_line(run: ValidationRun) -> list[str]:
    """The static patch signs in one line (the first three); nothing when no static check ran."""
    out = []
    for s in static_views(run):
        if s.error:
            text = f"error ({s.error})"
        elif s.evidence:
            shown = "; ".join(f"{e['sign']} at `{e['location']}`" for e in s.evidence[:3])
            more = max(s.total or 0, len(s.evidence)) - 3
            text = shown + (f"; {more} more" if more > 0 else "")
        else:
            text = f"{s.total} found" if s.total else "none found"
        out += ["", f"Static patch signs: {_cell(text)}"]
    return out


def _code_path_line(run: ValidationRun) -> list[str]:
    """Changed hunks run by some check, and what base ran that patched never runs; nothing when not traced."""
    out = []
    for cp in code_path_views(run):
        code = [h for h in cp.payload.hunks if h.runs_code]
        text = f"{sum(1 for h in code if h.executed_by)} of {len(code)} changed hunk(s) executed by a check"
        bypassed = [f"`{b.file}::{b.function}`" for b in cp.payload.bypassed] + [
            f"`{b.file}:{b.base_line}`" for b in cp.payload.bypassed_branches]
        if bypassed:
            text += "; run on base, never on patched: " + ", ".join(bypassed[:3])
        out += ["", f"Code paths: {_cell(text)}"]
    return out


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
        lines += [f"| {_cell(c.name)} | {c.kind} | " + " | ".join(_cell(observation_cell(c, x)) for x in Variant)
                  + f" | {_cell(', '.join(c.flags)) or '—'} |" for c in run.checks]
    lines += _apps_table(run) + _static_line(run) + _code_path_line(run)
    lines += ["", "Reproduce:", "", _code_block(run.command), ""]
    if run.seed is not None:
        lines += [f"Prompts drawn with seed {run.seed} (`--seed {run.seed}` sends the same ones again).", ""]
    return "\n".join(lines)
