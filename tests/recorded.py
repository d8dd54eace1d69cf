"""The recorded runs of tests/data/runs/ (real vLLM-CPU and HF workers, scripts/record-test-runs.sh):
unpacking one, and grading it as `regrade` does."""

from __future__ import annotations

import tarfile
from pathlib import Path

from infercheck.grade import Graded
from infercheck.engine_limits import engine_version
from infercheck.intake import intake
from infercheck.options import load_options
from infercheck.pipeline import grade_run
from infercheck.plan import Plan, plan_for
from infercheck.report.files import load_run
from infercheck.run.store import load_stored

RUNS = Path(__file__).resolve().parent / "data" / "runs"


def unpack(name: str, into: Path) -> Path:
    with tarfile.open(RUNS / f"{name}.tar.xz") as tar:
        tar.extractall(into, filter="data")
    return into / name


def graded(folder: Path) -> Graded:
    found, run = intake(load_options(folder, "regrade")), load_run(folder)
    return grade_run(found, plan_for(found), load_stored(folder / "runs"), engine_version(run.engine), run.device)


def recorded_plan(folder: Path) -> Plan:
    return plan_for(intake(load_options(folder, "regrade")))
