"""The code-path check over recorded traces (pure): which checks ran the changed hunks, a change no
check runs (INCONCLUSIVE), a function base ran and patched never runs (WORKAROUND), the report."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from infercheck.checks.code_path import code_path_check
from infercheck.names import CheckFlag, Headline, Variant
from infercheck.payloads import CodePathPayload
from infercheck.plan import group_checks
from infercheck.records import ValidationRun
from infercheck.report.files import write_report
from infercheck.run.job import Group, Job, LmEvalTask, Request
from infercheck.verdict import decide

FILE = "vllm/v1/sample/s.py"
BASE = '''def sample(logits, k):
    if k:
        return fast_top_k(logits, k)
    return logits


def fast_top_k(logits, k):
    return logits[:k - 1]


def cuda_only(logits):
    return logits
'''
ROOT_FIX = BASE.replace("logits[:k - 1]", "logits[:k]")
BYPASS = BASE.replace("        return fast_top_k(logits, k)", "        return sorted(logits)[:k]")
UNUSED = BASE.replace("def cuda_only(logits):\n    return logits", "def cuda_only(logits):\n    return logits * 1")
GROUPS = {"g0": ["parity/short", "symptom"], "app:sampler:s": ["app/sampler"]}
RAN = {Variant.BASE: {"g0", "app:sampler:s"}, Variant.PATCHED: {"g0", "app:sampler:s"}}


def check(patched_src: str, patched_lines: dict[str, list[int]], base_lines: dict[str, list[int]] | None = None):
    base_lines = base_lines or {"g0": [1, 2, 4], "app:sampler:s": [1, 2, 3, 7, 8]}
    traces = {Variant.BASE: {g: {FILE: ls} for g, ls in base_lines.items()},
              Variant.PATCHED: {g: {FILE: ls} for g, ls in patched_lines.items()}}
    sources = {Variant.BASE: {FILE: BASE}, Variant.PATCHED: {FILE: patched_src}}
    return code_path_check([FILE], GROUPS, traces, sources, RAN)


def test_a_root_fix_run_by_a_check_names_the_check_and_raises_nothing():
    result = check(ROOT_FIX, {"g0": [1, 2, 4], "app:sampler:s": [1, 2, 3, 7, 8]})
    assert result.flags == [] and result.patched.passed
    (hunk,) = result.payload.hunks
    assert hunk.hunk == f"{FILE}:-8,1 +8,1" and hunk.executed_by == ["app/sampler"] and hunk.runs_code
    assert result.base.detail.functions == [f"{FILE}::fast_top_k", f"{FILE}::sample"]


def test_a_change_no_check_runs_is_not_exercised_and_the_verdict_inconclusive():
    result = check(UNUSED, {"g0": [1, 2, 4], "app:sampler:s": [1, 2, 3, 7, 8]})
    assert result.flags == [CheckFlag.NOT_EXERCISED]
    assert "never exercised by any check: vllm/v1/sample/s.py:-12,1 +12,1" in result.payload.not_exercised
    verdict = decide([result], [], has_symptom=True)
    assert verdict.headline == Headline.INCONCLUSIVE and "never exercised" in verdict.flags[0].message


def test_a_fast_path_base_ran_and_patched_never_calls_is_a_workaround_naming_function_and_checks():
    result = check(BYPASS, {"g0": [1, 2, 4], "app:sampler:s": [1, 2, 3]})
    assert result.flags == [CheckFlag.WORKAROUND]
    assert [(b.function, b.checks) for b in result.payload.bypassed] == [("fast_top_k", ["app/sampler"])]
    verdict = decide([result], [], has_symptom=True)
    assert verdict.headline == Headline.WORKAROUND and "s.py::fast_top_k (base: app/sampler)" in verdict.flags[0].message


def test_a_group_that_did_not_finish_on_patched_judges_no_bypass():
    traces_missing = check(BYPASS, {"g0": [1, 2, 4]})
    assert [b.function for b in traces_missing.payload.bypassed] == ["fast_top_k"]  # ran, executed nothing there
    ran = {Variant.BASE: RAN[Variant.BASE], Variant.PATCHED: {"g0"}}
    result = code_path_check([FILE], GROUPS, {Variant.BASE: {"app:sampler:s": {FILE: [1, 2, 3, 7, 8]}},
                                              Variant.PATCHED: {"g0": {FILE: [1, 2, 4]}}},
                             {Variant.BASE: {FILE: BASE}, Variant.PATCHED: {FILE: BYPASS}}, ran)
    assert result.payload.bypassed == []


def test_nothing_to_trace_or_a_run_recorded_before_tracing_gives_no_check():
    assert code_path_check([], GROUPS, {}, {}, RAN) is None
    assert code_path_check([FILE], GROUPS, {Variant.BASE: None, Variant.PATCHED: None}, {}, RAN) is None
    one_missing = code_path_check([FILE], GROUPS, {Variant.BASE: {}, Variant.PATCHED: None}, {}, RAN)
    assert one_missing.flags == [] and "no executed lines recorded for patched" in one_missing.patched.detail.note


def test_group_checks_name_the_checks_each_engine_group_serves():
    job = Job("vllm", "m", "float32", [
        Group("g0", {}, [Request("symptom#p0", "1+1="), Request("parity/short#p1", "2+2=")],
              [LmEvalTask("addition", "accuracy/addition", "tasks", ["acc"])]),
        Group("app:sampler:s", {}, [Request("app/sampler#s/k0", "x")])])
    assert group_checks(job) == {"g0": ["accuracy/addition", "parity/short", "symptom"],
                                 "app:sampler:s": ["app/sampler"]}


def test_the_report_lists_each_hunk_with_its_checks_and_the_bypassed_functions(tmp_path):
    fixture = Path(__file__).parent.parent / "data" / "report" / "symptom_only.json"
    run = ValidationRun.from_dict(json.loads(fixture.read_text()))
    result = check(BYPASS, {"g0": [1, 2, 4], "app:sampler:s": [1, 2, 3]})
    run = dataclasses.replace(run, checks=[*run.checks, result])
    write_report(run, tmp_path / "run")
    html = (tmp_path / "run" / "index.html").read_text()
    assert 'id="code-path"' in html and f"{FILE}:-3,1 +3,1" in html and "fast_top_k" in html
    again = ValidationRun.from_dict(json.loads((tmp_path / "run" / "results.json").read_text()))
    assert isinstance(again.checks[-1].payload, CodePathPayload) and again.checks[-1].payload.bypassed


SEEDED = '''def forward(logits, generators):
    seeds = draw(len(logits))
    for i, gen in generators.items():
        seeds[i] = gen.draw()
    return sample(logits, seeds)
'''
# The route-around placed inside a function that still runs: seeded batches leave before the seeded path.
SEEDED_ELSEWHERE = SEEDED.replace("    seeds = draw(len(logits))\n",
                                  "    if generators:\n        return native(logits, generators)\n"
                                  "    seeds = draw(len(logits))\n")


def test_a_branch_base_ran_that_patched_never_takes_is_a_workaround_naming_its_line():
    traces = {Variant.BASE: {"app:sampler:s": {FILE: [1, 2, 3, 4, 5]}, "g0": {FILE: [1, 2, 3, 5]}},
              Variant.PATCHED: {"app:sampler:s": {FILE: [1, 2, 3]}, "g0": {FILE: [1, 2, 4, 5, 7]}}}
    sources = {Variant.BASE: {FILE: SEEDED}, Variant.PATCHED: {FILE: SEEDED_ELSEWHERE}}
    result = code_path_check([FILE], GROUPS, traces, sources, RAN)
    assert result.flags == [CheckFlag.WORKAROUND] and result.payload.bypassed == []
    (branch,) = result.payload.bypassed_branches
    assert (branch.function, branch.base_line, branch.patched_line, branch.checks) == ("forward", 4, 6, ["app/sampler"])
    assert f"branch {FILE}:4 in forward (base: app/sampler)" in result.payload.workaround
    # The same branch still taken by some check on patched: nothing bypassed.
    traces[Variant.PATCHED]["g0"][FILE].append(6)
    again = code_path_check([FILE], GROUPS, traces, sources, RAN)
    assert again.flags == [] and again.payload.bypassed_branches == []


def test_the_summary_counts_the_executed_hunks_and_names_what_was_bypassed(tmp_path):
    fixture = Path(__file__).parent.parent / "data" / "report" / "symptom_only.json"
    run = ValidationRun.from_dict(json.loads(fixture.read_text()))
    run = dataclasses.replace(run, checks=[*run.checks, check(BYPASS, {"g0": [1, 2, 4], "app:sampler:s": [1, 2, 3]})])
    write_report(run, tmp_path / "run")
    summary = (tmp_path / "run" / "summary.md").read_text()
    assert f"Code paths: 1 of 1 changed hunk(s) executed by a check; run on base, never on patched: `{FILE}::fast_top_k`" \
        in summary


def test_grade_names_the_checks_of_the_job_that_ran_not_of_a_rebuilt_plan():
    """A plan rebuilt for regrade has no staged lm-eval tasks; the stored job.json has them, so the
    accuracy suites that ran a bypassed function are named on the first grade and on every regrade."""
    from infercheck.grade import traced_code_path
    from infercheck.plan import Plan
    from infercheck.run.job import GroupResult
    from infercheck.run.store import RunOutcome, StoredRun, WorkerRows

    task = LmEvalTask("addition", "accuracy/zero-shot", "/tasks")
    job = Job("vllm", "m", "float32", [Group("g0", {}, [Request("parity/short#p0", "1+1=")], lm_eval=[task])],
              trace=[FILE])
    done = [GroupResult("g0", {}, 1, 1, 1, 0.1, 0.1)]
    rows = {Variant.BASE: WorkerRows([], done, [], {"g0": {FILE: [2, 3, 8]}}, {FILE: BASE}, job),
            Variant.PATCHED: WorkerRows([], done, [], {"g0": {FILE: [2, 3]}}, {FILE: BYPASS}, job)}
    plan = Plan("m", "m", "float32", [], None, [], [], trace=[FILE])  # as rebuilt: no tasks, no workloads
    result = traced_code_path(plan, StoredRun(RunOutcome(), {str(v): r for v, r in rows.items()}))
    assert result is not None and CheckFlag.WORKAROUND in result.flags
    assert result.payload.bypassed[0].function == "fast_top_k"
    assert result.payload.bypassed[0].checks == ["accuracy/zero-shot", "parity/short"]


PREEMPT = '''def preempt(request, reset):
    if reset:
        request.computed = 0


def schedule(request):
    if request.computed == 0:
        request.lookup()
    else:
        request.resume()
'''
PREEMPT_FIXED = PREEMPT.replace("    if reset:\n        request.computed = 0", "    request.computed = 0")
PREEMPT_GROUPS = {"app:preemption:p": ["app/preemption"], "g0": ["parity/short"]}
PREEMPT_RAN = {Variant.BASE: set(PREEMPT_GROUPS), Variant.PATCHED: set(PREEMPT_GROUPS)}


def preempt_check(repaired: frozenset[str], patched_src: str = PREEMPT_FIXED):
    """Base: the preempted request resumes down the `else` (the bug's state); patched: down the lookup."""
    traces = {Variant.BASE: {"app:preemption:p": {FILE: [2, 7, 8, 10]}, "g0": {FILE: [7, 8]}},
              Variant.PATCHED: {"app:preemption:p": {FILE: [2, 6, 7]}, "g0": {FILE: [6, 7]}}}
    sources = {Variant.BASE: {FILE: PREEMPT}, Variant.PATCHED: {FILE: patched_src}}
    return code_path_check([FILE], PREEMPT_GROUPS, traces, sources, PREEMPT_RAN, repaired)


def test_a_branch_only_the_repaired_checks_reached_outside_the_changed_functions_is_no_route_around(tmp_path):
    result = preempt_check(frozenset({"app/preemption"}))
    assert result.flags == [] and result.payload.bypassed_branches == []
    (branch,) = result.payload.after_fix_branches
    assert (branch.function, branch.base_line, branch.checks) == ("schedule", 10, ["app/preemption"])
    # The same branch, when the check that reached it did not fail on base: a route-around.
    healthy = preempt_check(frozenset())
    assert healthy.flags == [CheckFlag.WORKAROUND] and healthy.payload.after_fix_branches == []
    assert f"branch {FILE}:10 in schedule (base: app/preemption)" in healthy.payload.workaround
    fixture = Path(__file__).parent.parent / "data" / "report" / "symptom_only.json"
    run = dataclasses.replace(ValidationRun.from_dict(json.loads(fixture.read_text())), checks=[result])
    write_report(run, tmp_path / "run")
    assert "branch no longer reached after the fix" in (tmp_path / "run" / "index.html").read_text()
    again = ValidationRun.from_dict(json.loads((tmp_path / "run" / "results.json").read_text()))
    assert again.checks[-1].payload.after_fix_branches == result.payload.after_fix_branches


def test_a_branch_inside_a_changed_function_stays_a_route_around_even_when_its_check_was_repaired():
    # The patch edits `schedule` itself (its lookup line), so the branch it stops reaching is its own doing.
    edited = PREEMPT_FIXED.replace("        request.lookup()", "        request.lookup(fresh=True)")
    result = preempt_check(frozenset({"app/preemption"}), edited)
    assert result.flags == [CheckFlag.WORKAROUND] and result.payload.after_fix_branches == []
    assert [b.base_line for b in result.payload.bypassed_branches] == [10]
