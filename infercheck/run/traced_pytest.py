"""`python -m infercheck.run.traced_pytest --out DIR [--trace FILE...] -- PYTEST_ARGS`: a pytest run
(the pytest symptom, in a variant's engine env) under the worker's tracer, so the code-path check
sees what the symptom's own test executed (docs/design.md, "Code-path evidence"), and under the
harness's lifeline (run/lifeline.py: it stops if the harness dies). Exits with pytest's exit code;
with --trace, TRACE and SOURCES land in DIR with the one group PYTEST_GROUP."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from infercheck.run.job import PYTEST_GROUP
from infercheck.run.lifeline import watch_harness
from infercheck.run.worker import Tracer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="infercheck.run.traced_pytest")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--trace", nargs="*", default=[])
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    watch_harness()
    tracer = Tracer(list(args.trace))
    tracer.group(PYTEST_GROUP)
    try:
        import pytest

        return int(pytest.main([a for a in args.pytest_args if a != "--"]))
    finally:
        args.out.mkdir(parents=True, exist_ok=True)
        tracer.save(args.out)


if __name__ == "__main__":
    sys.exit(main())
