"""Bad input at the command line: one clear line on stderr, a non-zero exit, no traceback."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, cli_env, infercheck


def test_missing_model_folder(isolated_cache, tmp_path):
    proc = infercheck(isolated_cache, "run", "--model", str(tmp_path / "no-such-model"))
    assert_one_line_error(proc, 2, "model not found")


def test_engine_arg_without_value(isolated_cache):
    proc = infercheck(isolated_cache, "run", "--engine-arg", "enforce_eager")
    assert_one_line_error(proc, 2, "KEY=VALUE")


@pytest.mark.parametrize("content,fragment", [(None, "patch not found"), ("", "patch is empty"),
                                              ("--- a/../x\n+++ b/../x\n@@ -1 +1 @@\n-a\n+b\n", "outside")])
def test_bad_patch_for_build(isolated_cache, tmp_path, content, fragment):
    path = tmp_path / "p.patch"
    if content is not None:
        path.write_text(content)
    assert_one_line_error(infercheck(isolated_cache, "build", "--patch", str(path)), 2, fragment)


def test_compiled_patch_stops_on_cpu(isolated_cache, patch_dir, monkeypatch):
    monkeypatch.setenv("INFERCHECK_DEVICE", "cpu")
    proc = infercheck(isolated_cache, "build", "--patch", str(patch_dir / "csrc_attention.patch"))
    assert_one_line_error(proc, 2, "csrc/cpu/")
    assert "source" in proc.stderr and "CPU host" in proc.stderr


def test_unknown_model_name_for_models_build(isolated_cache):
    assert_one_line_error(infercheck(isolated_cache, "models", "build", "gpt-9"), 2, "unknown model")


def test_models_list_reports_bundled_models(isolated_cache):
    proc = infercheck(isolated_cache, "models", "list")
    assert proc.returncode == 0 and "tiny-llama-add" in proc.stdout and "tiny-sliding" in proc.stdout


BAD_PATCHES = {
    "missing": (None, "patch not found"),
    "empty": ("", "patch is empty"),
    "binary": (b"\x89PNG\x00\x00", "binary"),
    "dotdot": ("--- a/../../etc/passwd\n+++ b/../../etc/passwd\n@@ -1 +1 @@\n-a\n+b\n", "outside the engine tree"),
    "does-not-apply": ("--- a/vllm/envs.py\n+++ b/vllm/envs.py\n@@ -1,2 +1,2 @@\n-this line is not there\n"
                       "+nor is this\n context\n", "patch does not apply"),
}


@pytest.mark.parametrize("kind", list(BAD_PATCHES))
def test_validate_refuses_bad_patches_and_keeps_earlier_reports(isolated_cache, tmp_path, monkeypatch, kind):
    reports = tmp_path / "reports"
    earlier = reports / "20260101-000000-earlier"
    earlier.mkdir(parents=True)
    (earlier / "index.html").write_text("<html>earlier</html>")
    (reports / "index.html").write_text("<html>index</html>")
    monkeypatch.setenv("INFERCHECK_REPORTS", str(reports))
    content, fragment = BAD_PATCHES[kind]
    path = tmp_path / f"{kind}.patch"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    proc = subprocess.run([sys.executable, "-m", "infercheck.cli", "validate", str(path)], capture_output=True,
                          text=True, env={**cli_env(isolated_cache), "INFERCHECK_REPORTS": str(reports)}, timeout=300)
    assert_one_line_error(proc, 2, fragment)
    assert sorted(p.name for p in reports.iterdir()) == ["20260101-000000-earlier", "index.html"]
    assert (earlier / "index.html").read_text() == "<html>earlier</html>"
    assert (reports / "index.html").read_text() == "<html>index</html>"


def test_validate_unknown_case_and_symptom(isolated_cache, tmp_path, patch_dir):
    patch = str(patch_dir / "greedy_runner_up.patch")
    assert_one_line_error(infercheck(isolated_cache, "validate", patch, "--case", str(tmp_path)), 2, "no case.yaml")
    assert_one_line_error(infercheck(isolated_cache, "validate", patch, "--symptom", str(tmp_path / "s.yaml")), 2,
                          "file not found")


def test_report_of_a_folder_without_results(isolated_cache, tmp_path):
    assert_one_line_error(infercheck(isolated_cache, "report", str(tmp_path)), 2, "results.json")


def test_hub_model_offline_is_a_clear_error(isolated_cache, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "infercheck.cli", "run", "--model", "meta-llama/Llama-3.2-1B"],
                          capture_output=True, text=True, env={**cli_env(isolated_cache), "HF_HUB_OFFLINE": "1",
                                                               "HF_HUB_CACHE": str(tmp_path)})
    assert_one_line_error(proc, 2, "hub is not reachable (offline)")


def test_standard_task_offline_is_a_clear_error(isolated_cache, patch_dir, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "infercheck.cli", "validate", str(patch_dir / "greedy_runner_up.patch"),
                           "--suites", "gsm8k"], capture_output=True, text=True,
                          env={**cli_env(isolated_cache), "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path)})
    assert_one_line_error(proc, 2, "accuracy/gsm8k: standard lm-eval task(s)")


def test_neighbours_command_lists_sampling_apps_first(isolated_cache, patch_dir):
    # No package index here: the engine's tests cannot be had, and the command says so in one line.
    proc = subprocess.run([sys.executable, "-m", "infercheck.cli", "neighbours",
                           str(patch_dir / "greedy_runner_up.patch")], capture_output=True, text=True, timeout=120,
                          env={**cli_env(isolated_cache), "PIP_INDEX_URL": "http://127.0.0.1:9/simple"})
    assert proc.stdout.splitlines()[1].startswith("  changed functions: vllm/")
    lines = [ln.split() for ln in proc.stdout.splitlines()[2:]]
    assert proc.returncode == 0 and lines[0][0] in ("app", "oracle") and "sampler-distribution" in proc.stdout
    assert lines[-2][:2] == ["suite", "accuracy/addition-zero-shot"]
    assert proc.stdout.splitlines()[-1].startswith("  engine tests: skipped, the engine's tests could not be had")


def test_compiled_patch_in_validate_is_an_error_build_verdict_with_report(isolated_cache, tmp_path, patch_dir):
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "infercheck.cli", "validate", str(patch_dir / "csrc_attention.patch"),
                           "--out", str(out), "--suites", "parity"], capture_output=True, text=True,
                          env={**cli_env(isolated_cache), "INFERCHECK_DEVICE": "cpu"}, timeout=300)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stdout.startswith("ERROR:build") and "csrc/cpu/attention.cpp" in proc.stdout
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["headline"] == "ERROR:build"
    assert "ERROR:build" in (out / "index.html").read_text()


def test_a_patch_that_edits_its_own_judges_can_be_refused(isolated_cache, tmp_path):
    from infercheck.records import Flag
    from infercheck.intake import judge_edits
    from infercheck.names import Notice
    from infercheck.verdict import decide

    patch = tmp_path / "judges.patch"
    patch.write_text("--- a/tests/samplers/test_sampler.py\n+++ b/tests/samplers/test_sampler.py\n@@ -1 +1 @@\n"
                     "-assert close(a, b)\n+pass\n--- a/vllm/sampler.py\n+++ b/vllm/sampler.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n")
    proc = infercheck(isolated_cache, "validate", str(patch), "--refuse-judge-edits")
    assert_one_line_error(proc, 2, "edits its own judges (tests / CI config: tests/samplers/test_sampler.py)")
    touched = {"tests/samplers/test_sampler.py": "tests", "vllm/sampler.py": "python",
               ".buildkite/test-pipeline.yaml": "config", "setup.cfg": "config"}
    assert judge_edits(touched) == ["tests/samplers/test_sampler.py", ".buildkite/test-pipeline.yaml"]
    # without the option the flag is kept in the verdict but does not change the headline
    verdict = decide([], [Flag(Notice.EDITS_OWN_JUDGES, None, "edits its own judges")], has_symptom=True)
    assert verdict.headline == "RESOLVED" and verdict.flags[0].code == Notice.EDITS_OWN_JUDGES


def test_a_closed_stdout_is_not_a_traceback(isolated_cache):
    """`infercheck neighbours P | head -1`: the reader goes away early; the command ends quietly."""
    patch = Path(__file__).resolve().parents[2] / "patches" / "top-k-mixed-batch" / "bug.patch"
    proc = subprocess.Popen([sys.executable, "-m", "infercheck.cli", "neighbours", str(patch)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=cli_env(isolated_cache), bufsize=0)
    proc.stdout.close()  # before the command writes anything
    _, err = proc.communicate(timeout=60)
    assert proc.returncode in (0, 141) and b"Traceback" not in err, err.decode()
