"""The code-path check: which checks executed the patch's changed lines, and which functions of the
touched files base ran that patched never runs (docs/design.md, "Code-path evidence"). Pure: the
workers' recorded lines (per engine group) and the touched files' text as each variant ran them in,
one CheckResult out.

- *Patch exercised*: every hunk between the base and the patched file is listed with the checks
  that ran it (its added statements on patched, its removed ones on base). A patch with statements
  in its hunks of which no check runs any is NOT_EXERCISED: nothing here looked at the change, so
  the verdict cannot be RESOLVED (INCONCLUSIVE).
- *Bypassed path*: a function that still exists on patched, that a check ran on base and that no
  check runs on patched, is WORKAROUND evidence: the patch routes around it, whatever the outputs
  and the timing show (a bypassed fast path costs nothing measurable on a tiny model). So is a
  branch the patch left unchanged (the body of an if/else, a loop, a handler) that a check ran on
  base and no check runs on patched, outside the bypassed functions: the route-around placed
  inside a function that still runs. Except a branch downstream of the fix: one outside every
  function the patch changes that only checks the patch repaired (failing on base, passing on
  patched) ran on base. A fix of the state that led a failing check there stops it reaching the
  branch (a preempted request no longer resumes down the "already computed" path); the branch is
  listed apart, not counted as a route-around. A route-around inside a changed function, or of a
  branch a check healthy on base ran, stays WORKAROUND evidence.
"""

from __future__ import annotations

from infercheck.code_paths import (bypassed_blocks, bypassed_functions, changed_functions, changed_hunks, functions_run,
                                   hunk_statements, nested, statements_executed)
from infercheck.names import ENGINE_VARIANTS, CheckFlag, CheckKind, Variant
from infercheck.payloads import BranchEvidence, BypassEvidence, CodePathDetail, CodePathPayload, HunkEvidence
from infercheck.records import CheckResult, Observation

NAME = "code-path/touched-files"
Lines = dict[str, dict[str, list[int]]]  # group -> file -> executed lines (a worker's TRACE)
Runs = dict[str, dict[str, set[int]]]  # check -> file -> executed lines
MAX_LISTED = 12


def runs_by_check(trace: Lines, group_checks: dict[str, list[str]], ran: set[str]) -> Runs:
    """Each check that ran (its groups finished) -> the lines its groups executed per file."""
    out: Runs = {}
    for group, checks in group_checks.items():
        if group not in ran:
            continue
        for check in checks:
            files = out.setdefault(check, {})
            for file, lines in trace.get(group, {}).items():
                files.setdefault(file, set()).update(lines)
    return out


def code_path_check(files: list[str], group_checks: dict[str, list[str]], traces: dict[Variant, Lines | None],
                    sources: dict[Variant, dict[str, str | None]], ran: dict[Variant, set[str]],
                    repaired: frozenset[str] = frozenset()) -> CheckResult | None:
    """files: the traced files (the patch's Python files); group_checks: engine group -> its checks;
    traces / sources: per engine variant, what its worker recorded (None: nothing recorded);
    ran: per variant, the groups that finished; repaired: the checks that fail on base and pass on
    patched. None when the patch touches no traceable file or neither variant recorded lines."""
    if not files or all(traces.get(v) is None for v in ENGINE_VARIANTS):
        return None  # nothing to trace, or a run recorded before the workers traced
    criterion = ("some check executes the patch's changed lines; no function of the touched files that a check "
                 "ran on base goes unrun on patched")
    why = "the patch's Python files, traced in every engine group"
    missing = [v for v in ENGINE_VARIANTS if traces.get(v) is None]
    if missing:
        note = f"no executed lines recorded for {', '.join(missing)} (a run from before tracing, or a worker that died)"
        obs = {v: Observation(v, None, None, detail=CodePathDetail(note=note)) for v in ENGINE_VARIANTS}
        return CheckResult(NAME, CheckKind.CODE_PATH, "hunks executed", criterion, False, obs[Variant.BASE],
                           obs[Variant.PATCHED], None, [], CodePathPayload(list(files)), [], why)
    runs = {v: runs_by_check(traces[v] or {}, group_checks, ran[v]) for v in ENGINE_VARIANTS}
    text = {v: {f: sources.get(v, {}).get(f) or "" for f in files} for v in ENGINE_VARIANTS}
    hunks, bypassed, branches, after_fix_branches = [], [], [], []
    checks = sorted(set(runs[Variant.BASE]) | set(runs[Variant.PATCHED]))
    for file in files:
        base_src, patched_src = text[Variant.BASE][file], text[Variant.PATCHED][file]
        per_check = {v: {c: r.get(file, set()) for c, r in runs[v].items()} for v in ENGINE_VARIANTS}
        file_hunks = changed_hunks(file, base_src, patched_src)
        for hunk in file_hunks:
            removed, added = hunk_statements(hunk, base_src, patched_src)
            by = [c for c in checks if statements_executed(removed, added, per_check[Variant.BASE].get(c, set()),
                                                           per_check[Variant.PATCHED].get(c, set()))]
            hunks.append(HunkEvidence(hunk.name, bool(removed or added), by))
        functions = [BypassEvidence(b.file, b.function, list(b.checks))
                     for b in bypassed_functions(file, base_src, patched_src, per_check[Variant.BASE],
                                                 per_check[Variant.PATCHED])]
        gone = {b.function for b in functions}
        bypassed += functions
        changed = changed_functions(file_hunks, base_src, patched_src)
        for b in bypassed_blocks(file, base_src, patched_src, per_check[Variant.BASE], per_check[Variant.PATCHED]):
            if any(b.function == g or b.function.startswith(f"{g}.") for g in gone):
                continue
            evidence = BranchEvidence(b.file, b.function, b.base_line, b.patched_line, list(b.checks))
            after_fix = set(b.checks) <= repaired and not any(nested(b.function, c) for c in changed)
            (after_fix_branches if after_fix else branches).append(evidence)
    code = [h for h in hunks if h.runs_code]
    executed = [h for h in code if h.executed_by]
    not_exercised = (f"the change is never exercised by any check: {', '.join(h.hunk for h in code[:MAX_LISTED])}"
                     if code and not executed else None)
    signs = [f"function {b.file}::{b.function} (base: {', '.join(b.checks[:3])})" for b in bypassed] + [
        f"branch {b.file}:{b.base_line} in {b.function or 'module'} (base: {', '.join(b.checks[:3])})"
        for b in branches]
    workaround = ("code of the touched files that checks ran on base and no check runs on patched: "
                  + "; ".join(signs[:MAX_LISTED])) if signs else None
    flags = [flag for flag, on in ((CheckFlag.NOT_EXERCISED, not_exercised), (CheckFlag.WORKAROUND, workaround)) if on]
    functions = {v: sorted(f"{file}::{name}" for file in files
                           for name in functions_run(text[v][file], set().union(*(r.get(file, set())
                                                                                  for r in runs[v].values()))))
                 for v in ENGINE_VARIANTS}
    base = Observation(Variant.BASE, float(len(functions[Variant.BASE])), True, None, None,
                       CodePathDetail(functions[Variant.BASE]))
    patched = Observation(Variant.PATCHED, float(len(executed)), not flags, None, len(code),
                          CodePathDetail(functions[Variant.PATCHED]))
    return CheckResult(NAME, CheckKind.CODE_PATH, "hunks executed", criterion, False, base, patched, None, flags,
                       CodePathPayload(list(files), hunks, bypassed, branches, not_exercised, workaround,
                                       after_fix_branches), [], why)
