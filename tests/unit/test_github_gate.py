"""The CI gate (docs/ci.md): the GitHub output built by infercheck/report/github.py, and the workflow
in docs/ci.md itself, its steps run with bash the way a runner runs them.

What is substituted, and only that: the unit tier starts no engine, so the gate step's
`infercheck validate ...` meets a stand-in `infercheck` first on PATH. The stand-in parses its
arguments with the real CLI parser, checks they name a recorded run's patch and case
(tests/data/runs/), copies that recorded run folder to `--out` and hands over to the real
`infercheck regrade OUT --github` with the step's `--fail-on`. Everything else (the step's script
and env as docs/ci.md writes them, the summary, annotations and outputs files, the exit status) is
the real thing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from infercheck.names import Notice
from infercheck.records import Flag, Verdict
from infercheck.report.github import (Annotation, Level, annotations, escape_data, escape_property, fails_the_run,
                                      output_lines)
from tests.conftest import assert_one_line_error, infercheck

ROOT = Path(__file__).resolve().parents[2]
CI_DOC = ROOT / "docs" / "ci.md"
RUNS = ROOT / "tests" / "data" / "runs"
CASE = "patches/processed-logprobs-before-temperature"
RECORDED = {"root-processed-after-temperature": "RESOLVED", "root-fix-with-finite-logprobs": "COLLATERAL",
            "early-path-off": "WORKAROUND"}

STAND_IN = '''#!{python}
"""Stand-in for `infercheck validate` (tests/unit/test_github_gate.py): regrade a recorded run."""
import json, os, shutil, sys
from pathlib import Path

from infercheck.cli import build_parser, main
from infercheck.options import load_options

argv = sys.argv[1:]
Path(os.environ["STAND_IN_ARGV"]).write_text(json.dumps(argv))
args = build_parser().parse_args(argv)
if args.command != "validate" or args.out is None or args.case is None or len(args.patch) != 1:
    sys.exit(f"stand-in: not `infercheck validate PATCH --case CASE --out DIR ...`: {{argv}}")
recorded = Path(os.environ["STAND_IN_RECORDED_RUN"])
stored = load_options(recorded, "regrade")
if args.patch[0].read_bytes() != stored.patch.read_bytes() or args.case.resolve().name != stored.case:
    sys.exit("stand-in: the step's patch and case are not the recorded run's")
shutil.copytree(recorded, args.out)
regrade = ["regrade", str(args.out), *(["--fail-on", args.fail_on] if args.fail_on else []),
           *(["--github"] if args.github else []), *(["--json"] if args.json else [])]
sys.exit(main(regrade))
'''


# --- the pure parts -------------------------------------------------------------------------------

def test_escaping_follows_githubs_rules():
    assert escape_data("50% of 2:1, then\r\nnext") == "50%25 of 2:1, then%0D%0Anext"
    assert escape_property("infercheck ERROR:run, 5%") == "infercheck ERROR%3Arun%2C 5%25"
    line = Annotation(Level.ERROR, "infercheck ERROR:run", "app/x: crashed\nlast: 100%").line()
    assert line == "::error title=infercheck ERROR%3Arun::app/x: crashed%0Alast: 100%25"
    assert "\n" not in line


@pytest.mark.parametrize("code, fail_on, error", [
    ("ERROR:build", None, True), ("NOT_FIXED", None, True), ("COLLATERAL", None, True),
    ("SYMPTOM_ONLY", None, True), ("WORKAROUND", None, True), ("INCONCLUSIVE", None, True),
    (Notice.EDITS_OWN_JUDGES, None, False),
    ("ERROR:run", ["error", "NOT_FIXED"], True), ("NOT_FIXED", ["error", "NOT_FIXED"], True),
    ("WORKAROUND", ["error", "NOT_FIXED"], False), ("INCONCLUSIVE", ["error", "NOT_FIXED"], False),
    (Notice.EDITS_OWN_JUDGES, [Notice.EDITS_OWN_JUDGES], False),  # a notice is never a verdict
])
def test_a_flag_is_an_error_when_its_verdict_fails_the_run(code, fail_on, error):
    assert fails_the_run(code, fail_on) is error


def test_one_annotation_per_flag_in_the_verdicts_order():
    flags = [Flag("COLLATERAL", "app/json", "app/json: passed on base, fails on patched"),
             Flag(Notice.EDITS_OWN_JUDGES, None, "the patch edits its own judges: tests/x.py"),
             Flag("INCONCLUSIVE", "accuracy/a", "accuracy/a: lacks statistical power")]
    verdict = Verdict("COLLATERAL", flags, 1)
    assert [a.line() for a in annotations(verdict, None)] == [
        "::error title=infercheck COLLATERAL::app/json: passed on base, fails on patched",
        "::warning title=infercheck EDITS_OWN_JUDGES::the patch edits its own judges: tests/x.py",
        "::error title=infercheck INCONCLUSIVE::accuracy/a: lacks statistical power"]
    assert [a.level for a in annotations(verdict, ["COLLATERAL"])] == [Level.ERROR, Level.WARNING, Level.WARNING]
    assert annotations(Verdict("RESOLVED", [], 0), None) == []


def test_output_lines():
    assert output_lines({"verdict": "ERROR:build", "report": "/r/a b"}) == "verdict=ERROR:build\nreport=/r/a b\n"
    assert output_lines({"report": "/r/a\nINFERCHECK_EOF"}) == (
        "report<<INFERCHECK_EOF_\n/r/a\nINFERCHECK_EOF\nINFERCHECK_EOF_\n")


# --- the workflow in docs/ci.md -------------------------------------------------------------------

def workflow() -> dict:
    blocks = re.findall(r"^```yaml\n(.*?)^```", CI_DOC.read_text(), re.S | re.M)
    assert len(blocks) == 1, "docs/ci.md holds exactly one yaml block: the workflow"
    return yaml.safe_load(blocks[0])


def step_running(pattern: str) -> tuple[dict, dict]:
    """(job, step) of the one step whose run: script matches pattern."""
    found = [(job, step) for job in workflow()["jobs"].values() for step in job["steps"]
             if re.search(pattern, step.get("run", ""), re.M)]
    assert len(found) == 1, f"one step of the workflow runs {pattern!r}, found {len(found)}"
    return found[0]


def step_env(job: dict, step: dict, supplied: dict[str, str]) -> dict[str, str]:
    """The job's and step's env as written; `${{ ... }}` values (matrix, runner) from `supplied`,
    which may also replace a literal one."""
    written = {**job.get("env", {}), **step.get("env", {})}
    missing = [k for k, v in written.items() if "${{" in str(v) and k not in supplied]
    assert not missing, f"the test must supply {missing}"
    return {**{k: str(v) for k, v in written.items()}, **supplied}


def run_step(step: dict, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    """A run: step as an ubuntu runner runs it (`bash -e SCRIPT`), GITHUB_* from env only."""
    script = cwd / "step.sh"
    script.write_text(step["run"])
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    return subprocess.run(["bash", "-e", str(script)], cwd=cwd, env={**clean, **env}, capture_output=True,
                          text=True, timeout=300)


def test_the_candidate_listing_step_lists_added_and_changed_fixes(tmp_path):
    job, step = step_running(r"^\s*git diff --name-only")
    repo = tmp_path / "repo"
    git = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}

    def commit(files: dict[str, str | None], message: str) -> None:
        for name, text in files.items():
            path = repo / name
            if text is None:
                path.unlink()
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
        subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
        subprocess.run(["git", "commit", "-qm", message], cwd=repo, check=True, env={**os.environ, **git})

    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    commit({"patches/c/case.yaml": "id: c\n", "patches/c/fixes/old.patch": "1\n",
            "patches/c/fixes/gone.patch": "1\n"}, "base")
    commit({"patches/c/fixes/new.patch": "1\n", "patches/c/fixes/old.patch": "2\n",  # new.patch: a rename of gone.patch
            "patches/c/fixes/gone.patch": None, "patches/c/bug.patch": "1\n", "README.md": "x\n"}, "pr")
    outputs = tmp_path / "outputs"
    proc = run_step(step, {**step_env(job, step, {}), "GITHUB_OUTPUT": str(outputs),
                           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}, repo)
    assert proc.returncode == 0, proc.stderr
    name, _, value = outputs.read_text().strip().partition("=")
    assert name == "patches" and json.loads(value) == ["patches/c/fixes/new.patch", "patches/c/fixes/old.patch"]


def gate_step_run(tmp_path: Path, recorded: str, supplied: dict[str, str]) -> tuple[subprocess.CompletedProcess, Path]:
    """The gate step on a scratch workspace (the repository's patches/ linked in), the stand-in
    regrading `recorded`; $GITHUB_STEP_SUMMARY and $GITHUB_OUTPUT already hold an earlier step's lines."""
    job, step = step_running(r"^\s*infercheck validate ")
    work = tmp_path / "workspace"
    work.mkdir()
    (work / "patches").symlink_to(ROOT / "patches")
    with tarfile.open(RUNS / f"{recorded}.tar.xz") as tar:
        tar.extractall(tmp_path / "recorded", filter="data")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "infercheck").write_text(STAND_IN.format(python=sys.executable))
    (bin_dir / "infercheck").chmod(0o755)
    (tmp_path / "summary.md").write_text("earlier step\n")
    (tmp_path / "outputs").write_text("earlier=1\n")
    env = {**step_env(job, step, supplied),
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"), "GITHUB_OUTPUT": str(tmp_path / "outputs"),
           "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT),
           "INFERCHECK_REPORTS": str(tmp_path / "reports"),
           "STAND_IN_RECORDED_RUN": str(tmp_path / "recorded" / recorded),
           "STAND_IN_ARGV": str(tmp_path / "argv.json")}
    return run_step(step, env, work), work


@pytest.mark.parametrize("recorded, headline", list(RECORDED.items()))
def test_the_gate_step_passes_only_a_resolved_patch_and_reports_to_github(tmp_path, recorded, headline):
    patch = f"{CASE}/fixes/{recorded}.patch"
    job, step = step_running(r"^\s*infercheck validate ")
    fail_on = step_env(job, step, {"PATCH": patch})["FAIL_ON"]
    proc, work = gate_step_run(tmp_path, recorded, {"PATCH": patch})
    assert proc.returncode == (0 if headline == "RESOLVED" else 1), proc.stderr
    report = work / "infercheck-report"  # the workflow's REPORT, as uploaded
    assert json.loads((tmp_path / "argv.json").read_text()) == [
        "validate", patch, "--case", CASE, "--out", "infercheck-report", "--fail-on", fail_on, "--github"]
    verdict = json.loads((report / "verdict.json").read_text())
    assert verdict["headline"] == headline and verdict["exit_code"] == proc.returncode
    summary = (report / "summary.md").read_text()
    assert f"**{headline}**" in summary
    assert (tmp_path / "summary.md").read_text() == "earlier step\n" + summary
    errors = [ln for ln in proc.stdout.splitlines() if ln.startswith("::error ")]
    assert len(verdict["flags"]) == (0 if headline == "RESOLVED" else 1)
    assert errors == [f"::error title=infercheck {f['code']}::{f['message']}" for f in verdict["flags"]]
    assert "::warning" not in proc.stdout and not [ln for ln in proc.stderr.splitlines() if ln.startswith("::")]
    assert (tmp_path / "outputs").read_text() == f"earlier=1\nverdict={headline}\nreport={report.resolve()}\n"


def test_a_verdict_left_out_of_fail_on_passes_the_gate_with_its_flags_as_warnings(tmp_path):
    proc, work = gate_step_run(tmp_path, "early-path-off",
                               {"PATCH": f"{CASE}/fixes/early-path-off.patch", "FAIL_ON": "ERROR,NOT_FIXED"})
    assert proc.returncode == 0, proc.stderr
    annotations_out = [ln for ln in proc.stdout.splitlines() if ln.startswith("::")]
    assert len(annotations_out) == 1 and annotations_out[0].startswith("::warning title=infercheck WORKAROUND::")
    assert "exit code 0" in (tmp_path / "summary.md").read_text()
    assert "verdict=WORKAROUND\n" in (tmp_path / "outputs").read_text()


# --- --github outside the workflow ----------------------------------------------------------------

def test_github_with_json_keeps_stdout_json_and_says_when_no_summary_file_is_set(isolated_cache, tmp_path,
                                                                                 monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "outputs"))
    monkeypatch.setenv("INFERCHECK_REPORTS", str(tmp_path / "reports"))
    with tarfile.open(RUNS / "early-path-off.tar.xz") as tar:
        tar.extractall(tmp_path, filter="data")
    proc = infercheck(isolated_cache, "regrade", str(tmp_path / "early-path-off"), "--json", "--github")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert json.loads(proc.stdout)["headline"] == "WORKAROUND"  # stdout is verdict.json alone
    assert [ln for ln in proc.stderr.splitlines() if ln.startswith("::error title=infercheck WORKAROUND::")]
    unset = [ln for ln in proc.stderr.splitlines() if "GITHUB_STEP_SUMMARY" in ln]
    assert len(unset) == 1 and "not set" in unset[0]
    assert "verdict=WORKAROUND\n" in (tmp_path / "outputs").read_text()


def test_bad_input_under_github_is_one_error_line_and_one_annotation(isolated_cache, tmp_path):
    proc = infercheck(isolated_cache, "validate", str(tmp_path / "missing.patch"), "--github")
    assert_one_line_error(proc, 2, "patch not found")
    error = next(ln for ln in proc.stderr.splitlines() if ln.startswith("infercheck: error: "))
    assert [ln for ln in proc.stdout.splitlines() if ln.startswith("::")] == [
        f"::error title=infercheck::{escape_data(error.removeprefix('infercheck: error: '))}"]
