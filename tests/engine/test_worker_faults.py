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
