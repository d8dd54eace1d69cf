"""Bad input and broken engines through the CLI: one clear line, non-zero exit, no traceback."""

from __future__ import annotations

import pytest

from tests.unit.test_cli import assert_one_line_error, infercheck

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
