"""Command line: `infercheck <command>`. Errors end as one line on stderr and a non-zero exit."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from typing import Callable

from infercheck.errors import InfercheckError


DTYPE_HELP = "float32, bfloat16 or float16 (default: the model's own: bfloat16 for tiny-gdn, float32 otherwise)"


def add_variant_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--patch", action="append", default=[], type=Path, metavar="P",
                   help="patch applied to the engine tree (repeatable, in order)")
    p.add_argument("--engine-src", type=Path, help="a vLLM git checkout to use as the engine tree")


def add_report_options(p: argparse.ArgumentParser, fail_on_default: str = "all but RESOLVED/CLEAN") -> None:
    """How a graded run reports itself: exit code, --json, --github (docs/ci.md)."""
    p.add_argument("--fail-on", metavar="LIST", help=f"comma-separated verdicts that exit 1 (default: {fail_on_default})")
    p.add_argument("--json", action="store_true", help="print verdict.json alone to stdout (the other lines on stderr)")
    p.add_argument("--github", action="store_true",
                   help="in GitHub Actions: summary.md appended to $GITHUB_STEP_SUMMARY, one ::error/::warning "
                        "annotation per flag (on stderr with --json), verdict= and report= to $GITHUB_OUTPUT")


def add_quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quiet", action="store_true",
                   help="no progress on stderr (live worker lines appear only on a terminal, stage lines otherwise)")


def seed_arg(text: str) -> int:
    from infercheck.draw import parse_seed

    try:
        return parse_seed(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--seed ")) from None


def jobs_arg(text: str) -> int:
    try:
        jobs = int(text)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of workers, 1 or more (got {text!r})")
    return jobs


def add_jobs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--jobs", type=jobs_arg, metavar="N",
                   help="workers side by side, each in its own share of the CPUs (default: one per CPU, bounded "
                        "by memory, at most 4; 1 on CUDA); --jobs 1 runs them one after another")
    p.add_argument("--ray", action="store_true",
                   help="run the engine and reference workers as Ray tasks (the ray extra), each asking for its "
                        "share of CPUs (or a GPU): a local Ray instance, or the cluster at --ray-address; the cache "
                        "and run folders must be at the same path on every node")
    p.add_argument("--ray-address", metavar="ADDRESS",
                   help="the Ray cluster for --ray (implies it; e.g. ray://head:10001 or auto)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="infercheck", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    models = sub.add_parser("models", help="the bundled tiny model zoo")
    msub = models.add_subparsers(dest="models_command", required=True)
    mb = msub.add_parser("build", help="train (or, for the state-space ones, draw) and write the bundled models (deterministic)")
    mb.add_argument("names", nargs="*")
    mb.add_argument("--force", action="store_true")
    msub.add_parser("list", help="bundled models and whether their files match the manifest")
    mr = msub.add_parser("random", help="write a model that is not bundled: random weights of an architecture "
                                        "with its own tokenizer (for --model offline; deterministic)")
    mr.add_argument("arch", help="architecture (qwen2, mamba2, granitemoehybrid, qwen3_next)")
    mr.add_argument("--out", type=Path, required=True, help="a new folder")
    mr.add_argument("--seed", type=int, default=0)

    doctor = sub.add_parser("doctor", help="versions, device, model zoo, and a one-request smoke run")
    doctor.add_argument("--no-smoke", action="store_true")

    build = sub.add_parser("build", help="build an engine env for a tree + patches and print it")
    add_variant_options(build)

    run = sub.add_parser("run", help="run one worker (vllm or the HF reference) on prompts")
    add_variant_options(run)
    run.add_argument("--model", default="tiny-llama-add")
    run.add_argument("--backend", choices=["vllm", "hf"], default="vllm")
    run.add_argument("--dtype", help=DTYPE_HELP)
    run.add_argument("--prompt", action="append", default=[])
    run.add_argument("--engine-arg", action="append", default=[], metavar="K=V")
    run.add_argument("--max-tokens", type=int, default=8)
    run.add_argument("--logprobs", type=int, default=5)
    run.add_argument("--timeout", type=float, default=900.0)
    run.add_argument("--out", type=Path)
    run.add_argument("--json", action="store_true", help="print results as JSON lines")

    parity = sub.add_parser("parity", help="greedy parity of the engine (optionally patched) vs HF")
    add_variant_options(parity)
    parity.add_argument("--model", default="tiny-llama-add")
    parity.add_argument("--dtype", help=DTYPE_HELP)
    parity.add_argument("--prompts", type=int, default=8, help="number of held-out prompts (half many-shot)")
    parity.add_argument("--max-tokens", type=int, default=6)
    parity.add_argument("--timeout", type=float, default=900.0)
    parity.add_argument("--out", type=Path)

    val = sub.add_parser("validate", help="validate a patch: symptom, parity, accuracy → verdict and report")
    val.add_argument("patch", type=Path, nargs="*",
                     help="the candidate patch (omit with --resume); several, or a folder of *.patch files, "
                          "validates each against one base and ranks them (docs/design.md, \"Many candidates\")")
    val.add_argument("--resume", type=Path, metavar="RUN_DIR",
                     help="finish an interrupted validate in RUN_DIR with its own options, reusing finished work")
    val.add_argument("--base-patch", action="append", default=[], type=Path, metavar="P",
                     help="applied to the engine tree before PATCH, for base and patched alike (repeatable)")
    val.add_argument("--engine-src", type=Path)
    val.add_argument("--model", help="bundled model name or HF model folder (default: the case's, else tiny-llama-add)")
    val.add_argument("--dtype", help=DTYPE_HELP)
    val.add_argument("--symptom", type=Path, help="symptom spec YAML")
    val.add_argument("--case", type=Path, help="a bundled case folder: base patches, model and symptom")
    val.add_argument("--suites", help="comma-separated suites or kinds, e.g. parity,accuracy/addition-zero-shot")
    val.add_argument("--apps", help="comma-separated neighbouring apps to run, 'all' or 'none' "
                                    "(default: the neighbour map's choice for the files PATCH touches)")
    val.add_argument("--out", type=Path, help="report folder (default reports/<time>-<patch>/)")
    val.add_argument("--timeout", type=float, default=900.0, help="per-worker timeout in seconds")
    val.add_argument("--run-timeout", type=float, help="a time budget in seconds for the whole run (every worker)")
    val.add_argument("--no-reuse", action="store_true", help="do not reuse cached worker results")
    val.add_argument("--no-engine-tests", action="store_true",
                     help="do not run the engine's own tests of the touched modules (PASS_TO_PASS, FAIL_TO_PASS)")
    val.add_argument("--no-floor", action="store_true",
                     help="do not measure the unmodified engine's noise floor: parity checks keep the tolerance "
                          "table's values (faster; the report says so)")
    add_jobs(val)
    add_report_options(val)
    add_quiet(val)
    val.add_argument("--seed", type=seed_arg, help="the prompt draw's seed, to reproduce a run exactly "
                                                   "(default: $INFERCHECK_SEED, else a fresh draw)")
    val.add_argument("--refuse-judge-edits", action="store_true",
                     help="refuse a patch that edits the engine's tests or CI config (default: flag it)")

    nb = sub.add_parser("neighbours", help="the applications and suites a patch puts at risk, and why")
    nb.add_argument("patch", type=Path)

    cm = sub.add_parser("codemap", help="record which engine functions each app and oracle runs (the code map "
                                         "the neighbour selection reads)")
    cm.add_argument("action", choices=["build"], help="build: run every app and oracle once on the clean engine, "
                                                      "coverage over the whole engine package")
    cm.add_argument("--out", type=Path, help="map file (default suites/codemap/<engine>-<version>.json)")
    cm.add_argument("--work", type=Path, help="the worker's folder (default <cache>/codemap-run)")
    cm.add_argument("--timeout", type=float, default=3600.0, help="worker timeout in seconds")
    cm.add_argument("--reuse", action="store_true", help="record from a finished run of the same job in --work "
                                                         "instead of running it again")
    cm.add_argument("--add", action="store_true", help="run only the apps the stored map lacks or recorded from "
                                                       "another definition, merged into the finished full run in "
                                                       "--work (minutes instead of tens of minutes)")

    rep = sub.add_parser("report", help="re-render a report folder from its stored results (no engine)")
    rep.add_argument("folder", type=Path)

    reg = sub.add_parser("regrade", help="grade a run folder again from its stored worker results: checks, "
                                         "verdict and report (no engine)")
    reg.add_argument("folder", type=Path, metavar="RUN_DIR")
    add_report_options(reg, fail_on_default="the run's own")

    bench = sub.add_parser("bench", help="validate every bundled candidate; confusion matrix of expected vs got")
    bench.add_argument("root", type=Path, nargs="?", help="folder of cases (default: the bundled patches/)")
    bench.add_argument("--cases", help="comma-separated case ids (default: all)")
    bench.add_argument("--quick", action="store_true", help="only candidates marked `quick: true` (the CI subset)")
    bench.add_argument("--out", type=Path, help="bench folder (default reports/bench/)")
    bench.add_argument("--timeout", type=float, default=900.0, help="per-worker timeout in seconds")
    bench.add_argument("--no-reuse", action="store_true", help="recompute base and reference for every candidate")
    bench.add_argument("--seed", type=seed_arg, help="the prompt draw's seed, one for every candidate "
                                                     "(default: $INFERCHECK_SEED, else a fresh draw)")
    bench.add_argument("--no-bug-checks", action="store_true",
                       help="skip validating each case's bug.patch on the clean engine (symptom must pass there)")
    add_jobs(bench)
    add_quiet(bench)

    merge = sub.add_parser("bench-merge", help="one benchmark from bench folders run on parts of the cases at one seed "
                                               "(bench.json and index.html of their rows)")
    merge.add_argument("folders", type=Path, nargs="+", help="bench folders; a later folder's row replaces an "
                                                             "earlier one's for the same case and candidate")
    merge.add_argument("--out", type=Path, required=True, help="the merged bench folder")

    demo = sub.add_parser("demo", help="the main job on the bundled default")
    add_quiet(demo)

    perf = sub.add_parser("perf", help="where a validate's time goes (make bench-perf): a case cold, warm and as a "
                                       "further candidate, in rounds, medians written as JSON")
    perf.add_argument("--runs", type=int, default=3, help="rounds, each cold, warm and a further candidate in a fresh "
                                                          "cache (default 3); medians over them")
    perf.add_argument("--case", type=Path, help="a case folder with two candidates or more (default: the demo's)")
    perf.add_argument("--out", type=Path, help="the JSON (default reports/bench-perf.json; run folders beside it)")
    perf.add_argument("--seed", type=seed_arg, help="the prompt draw's seed, one for every run (default: "
                                                    "$INFERCHECK_SEED, else a fresh draw)")
    perf.add_argument("--cache-root", type=Path, help="where each round's fresh cache folder goes, removed after the "
                                                      "round (default: beside the cache, <cache>-perf)")
    add_quiet(perf)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP: unwinds like Ctrl-C (every `except BaseException` that stops a worker runs)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def raise_terminated(signum: int, frame: object) -> None:
    signal.signal(signum, signal.SIG_DFL)  # a second one ends the harness at once
    raise Terminated(signum)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from infercheck import commands

    handlers: dict[str, Callable[[argparse.Namespace], int]] = {
        "models": commands.cmd_models, "doctor": commands.cmd_doctor, "build": commands.cmd_build,
        "run": commands.cmd_run, "parity": commands.cmd_parity, "demo": commands.cmd_demo,
        "validate": commands.cmd_validate, "report": commands.cmd_report, "neighbours": commands.cmd_neighbours,
        "bench": commands.cmd_bench, "bench-merge": commands.cmd_bench_merge, "regrade": commands.cmd_regrade,
        "codemap": commands.cmd_codemap, "perf": commands.cmd_perf,
    }
    started = time.time()
    for signum in (signal.SIGTERM, signal.SIGHUP):  # a CI runner's or scheduler's cancel ends a run as Ctrl-C does
        signal.signal(signum, raise_terminated)
    try:
        return handlers[args.command](args)
    except InfercheckError as exc:  # WorkerError among them
        print(f"infercheck: error: {exc}", file=sys.stderr)
        if getattr(args, "github", False):  # the one line also where a GitHub check lists it
            from infercheck.report.github import error_annotation

            print(error_annotation(str(exc)).line(), file=sys.stderr if args.json else sys.stdout)
        return exc.exit_code
    except Terminated as exc:
        print(f"infercheck: {signal.Signals(exc.signum).name} after {time.time() - started:.0f}s: workers stopped; "
              f"a validate's run folder finishes with `infercheck validate --resume RUN_DIR`", file=sys.stderr)
        return 128 + exc.signum
    except KeyboardInterrupt:
        print(f"infercheck: interrupted after {time.time() - started:.0f}s", file=sys.stderr)
        return 130
    except BrokenPipeError:  # stdout closed early (`infercheck neighbours P | head`): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 141


if __name__ == "__main__":
    sys.exit(main())
