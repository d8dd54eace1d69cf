"""Bad input and broken engines through the CLI: one clear line, non-zero exit, no traceback."""

from __future__ import annotations

import pytest

from tests.conftest import assert_one_line_error, infercheck

pytestmark = pytest.mark.engine


def test_worker_that_crashes(isolated_cache, patch_dir):
    proc = infercheck(isolated_cache, "run", "--patch", str(patch_dir / "sampler_abort.patch"))
    assert_one_line_error(proc, 1, "patched worker failed (crash): killed by SIGABRT")


def test_worker_that_hangs(isolated_cache, patch_dir):
    proc = infercheck(isolated_cache, "run", "--patch", str(patch_dir / "import_hang.patch"), "--timeout", "20")
    assert_one_line_error(proc, 1, "patched worker failed (timeout): no result within 20s")


def test_unknown_engine_arg(isolated_cache):
    proc = infercheck(isolated_cache, "run", "--engine-arg", "max_num_seqz=4")
    assert_one_line_error(proc, 1, "unknown engine arg(s) max_num_seqz")


def test_doctor_reports_versions_and_smoke_run(isolated_cache):
    proc = infercheck(isolated_cache, "doctor")
    assert proc.returncode == 0, proc.stderr
    for fragment in ("vllm", "torch", "transformers", "lm_eval", "tiny-llama-add", "smoke: vllm answered"):
        assert fragment in proc.stdout


def test_an_isolated_group_that_fails_does_not_take_the_job_down(tmp_path):
    """An app engine the engine refuses (here a context longer than the model allows) is recorded on
    its group; the job's other group still runs and the worker ends 'done'."""
    from tests.engine.conftest import greedy_requests, run_job
    from infercheck.run.job import Group

    groups = [Group("app:broken:s", {"max_model_len": 10_000_000}, greedy_requests("x", ["12+34="], 4), isolated=True),
              Group("ok", {}, greedy_requests("y", ["12+34="], 4))]
    run = run_job("vllm", "tiny-llama-add", groups, tmp_path / "run")
    by_name = {g.name: g for g in run.groups()}
    assert "max_model_len" in (by_name["app:broken:s"].error or "")
    assert by_name["ok"].error is None and [r.id for r in run.results()] == ["y0"]


LONG_PROMPT = "".join(f"{i}+{i + 1}={2 * i + 1}\n" for i in range(10, 60)) + "12+34="


def test_memory_blowup_is_stopped_by_the_worker_limit(isolated_cache, patch_dir):
    """A runaway 64 GiB allocation on a 24 GiB machine: refused under the address-space limit
    (without it the kernel's OOM killer would take the worker, or the machine, down)."""
    proc = infercheck(isolated_cache, "run", "--patch", str(patch_dir / "memory_blowup.patch"), "--timeout", "300")
    assert_one_line_error(proc, 1, "patched worker failed (memory): MemoryError: an allocation was refused")


def test_kv_cache_exhaustion_is_an_error_not_a_hang(isolated_cache, patch_dir):
    """A patched engine that sizes its KV cache at 2 blocks: a 470-token prompt could never be
    scheduled; the worker says so instead of waiting for the timeout."""
    proc = infercheck(isolated_cache, "run", "--patch", str(patch_dir / "kv_cache_exhausted.patch"),
                      "--prompt", LONG_PROMPT, "--timeout", "300")
    assert_one_line_error(proc, 1, "KV cache exhausted: the engine has 2 blocks of 128 tokens")


def test_garbage_on_a_real_workers_stdout_changes_nothing(isolated_cache, patch_dir):
    plain = infercheck(isolated_cache, "run", "--prompt", "12+34=", "--json")
    noisy = infercheck(isolated_cache, "run", "--patch", str(patch_dir / "stdout_garbage.patch"), "--prompt", "12+34=",
                       "--json")
    assert plain.returncode == 0 and noisy.returncode == 0, noisy.stderr
    ids = [__import__("json").loads(p.stdout.splitlines()[-1])["output_ids"] for p in (plain, noisy)]
    assert ids[0] == ids[1]
    folder = next(line.split("→ ")[1].strip() for line in noisy.stderr.splitlines() if "→ " in line)
    assert b'{"state": "done"}' in (__import__("pathlib").Path(folder) / "worker.stdout").read_bytes()  # it did print


def test_nan_logits_fail_parity_with_evidence(isolated_cache, patch_dir, tmp_path):
    """Every softmax row NaN on patched: parity fails with infinite KL (a NaN never passes as
    'within tolerance'), and without a symptom spec that is COLLATERAL."""
    import json

    out = tmp_path / "nan"
    proc = infercheck(isolated_cache, "validate", str(patch_dir / "logits_nan.patch"), "--apps", "none",
                      "--suites", "parity/addition-short", "--out", str(out), timeout=900)
    assert "Traceback" not in proc.stderr and proc.returncode == 1, proc.stderr[-2000:]
    assert json.loads((out / "verdict.json").read_text())["headline"] == "COLLATERAL"
    parity = next(c for c in json.loads((out / "results.json").read_text())["checks"] if c["kind"] == "parity")
    assert "regressed" in parity["flags"] and parity["base"]["passed"] and not parity["patched"]["passed"]
    assert "inf" in json.dumps(parity["patched"]).lower()
