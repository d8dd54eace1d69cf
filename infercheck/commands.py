"""The CLI's commands. Each returns an exit code; errors are raised as InfercheckError."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from infercheck import __version__
from infercheck.build.builder import build_variant
from infercheck.build.engine_env import EngineEnv, installed_env
from infercheck.build.tree import engine_tree, find_installed_engine
from infercheck.checks.parity import compare_greedy, summarize
from infercheck.console import Console, parse_engine_arg, progress
from infercheck.device import detect_device
from infercheck.draw import Draw, chosen_seed
from infercheck.engine_limits import limitations_for
from infercheck.errors import InfercheckError
from infercheck.models import zoo
from infercheck.candidates import CANDIDATES_JSON, patch_files, ranking_text, validate_candidates, write_candidates
from infercheck.cases import load_case
from infercheck.paths import PATCHES_DIR, cache_dir, reports_dir
from infercheck.apps import load_apps
from infercheck.names import APP_LIKE
from infercheck.engine_test_tree import engine_test_tree
from infercheck.neighbours import installed_code_map_hits, select_engine_tests, select_neighbours
from infercheck.patch.intake import PatchFile, read_patch
from infercheck.options import ValidateOptions, load_options
from infercheck.pipeline import regrade, validate
from infercheck.report.files import REPORT_FILES, render_from_dir, write_index
from infercheck.report.github import OUTPUT, STEP_SUMMARY, annotations, output_lines
from infercheck.plan import Workload
from infercheck.prompts import Prompt, build_prompts
from infercheck.records import ValidationRun
from infercheck.suites import suites_for_model
from infercheck.run.job import Group, Job, Request
from infercheck.run.launcher import launch
from infercheck.run.slots import default_jobs

if TYPE_CHECKING:
    from infercheck.bench import BenchResult

PARITY_LOGPROB_TOL_FP32 = 1e-4


def cmd_models(args: argparse.Namespace) -> int:
    if args.models_command == "list":
        for name in zoo.bundled_names():
            ok, detail = zoo.verify(name)
            print(f"{name:16s} {zoo.model_dtype(name):9s} {'ok ' if ok else 'BAD'} {detail}")
        return 0
    if args.models_command == "random":
        from infercheck.models.random_build import ARCHITECTURES, build_random

        folder = build_random(args.arch, args.out, args.seed)
        dtype = ARCHITECTURES[args.arch].dtype
        print(f"{folder}: random {args.arch} (seed {args.seed}); use it with --model {folder}"
              + (f" --dtype {dtype}" if dtype != zoo.DEFAULT_DTYPE else ""))
        return 0
    from infercheck.models.random_build import build_bundled

    known = zoo.bundled_names()
    unknown = [n for n in args.names if n not in known]
    if unknown:
        raise InfercheckError(f"unknown model(s): {', '.join(unknown)} (known: {', '.join(known)})")
    for name in args.names or known:
        build = zoo.build if name in zoo.SPECS else build_bundled
        build(name, force=args.force, log=progress)
    return 0


def variant_env(args: argparse.Namespace, name: str, device: str) -> EngineEnv:
    """The engine env for --patch / --engine-src, or the installed engine when neither is given."""
    if not args.patch and args.engine_src is None:
        return installed_env(device)
    started = time.time()
    patches = [read_patch(Path(p)) for p in args.patch]
    env, applied = build_variant(engine_tree(args.engine_src), patches, name, device)
    progress(f"build {name}: {env.strategy} ({len(applied.touched)} file(s) changed) in {time.time() - started:.1f}s")
    return env


def run_dir(out: Path | None, label: str) -> Path:
    folder = out or cache_dir() / "runs" / f"{time.strftime('%Y%m%d-%H%M%S')}-{label}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def cmd_build(args: argparse.Namespace) -> int:
    env = variant_env(args, "patched", detect_device())
    print(json.dumps({"name": env.name, "strategy": env.strategy, "tree_hash": env.tree_hash,
                      "location": env.location, "pythonpath": list(env.pythonpath)}, indent=2))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    device = detect_device()
    model = str(zoo.model_dir(args.model))
    dtype = zoo.run_dtype(args.model, args.dtype)
    engine_args = dict(parse_engine_arg(a) for a in args.engine_arg)
    prompts = args.prompt or ["12+34="]
    requests = [Request(id=f"p{i}", prompt=p, sampling={"max_tokens": args.max_tokens, "temperature": 0.0},
                        logprobs=args.logprobs or None) for i, p in enumerate(prompts)]
    job = Job(args.backend, model, dtype, [Group("cli", engine_args, requests)])
    env = variant_env(args, "patched" if args.patch else "base", device)
    out = run_dir(args.out, f"run-{args.backend}")
    with Console() as console:
        console(f"run {args.backend} worker ({env.strategy}) → {out}")
        run = launch(job, env, out, timeout_s=args.timeout, watch=console.watch(args.backend)).raise_for_error()
        console(f"done in {run.elapsed_s:.1f}s")
    for result in run.results():
        print(json.dumps(asdict(result)) if args.json else f"{result.id}\t{result.text!r}\t{result.finish_reason}")
    return 0


def parity_job(backend: str, model: str, dtype: str, prompts: list[str], max_tokens: int) -> Job:
    """Greedy requests with top-5 logprobs, built like a suite workload."""
    workload = Workload("parity", {}, [Prompt(f"q{i}", p) for i, p in enumerate(prompts)], max_tokens, top_k=5)
    return Job(backend, model, dtype, [Group("parity", {}, workload.requests())])


def parity_prompts(count: int, model_name: str = "tiny-llama-add") -> list[str]:
    """For a bundled model, half zero-shot, half many-shot (400+ tokens) held-out addition prompts;
    for any other, general text from 200 to 3,000 characters (the general-text prompt set)."""
    if zoo.carries_general_text(model_name):
        return [p.text for p in build_prompts({"set": "general-text", "count": count, "min_chars": 200,
                                               "max_chars": 3000})]
    zero, _ = zoo.evaluation_prompts(many_shot=False, limit=count - count // 2)
    many, _ = zoo.evaluation_prompts(many_shot=True, limit=count // 2)
    return zero + many


def cmd_parity(args: argparse.Namespace) -> int:
    device = detect_device()
    model_dir = zoo.model_dir(args.model)
    model = str(model_dir)
    dtype = zoo.run_dtype(args.model, args.dtype)
    prompts = parity_prompts(args.prompts, model_dir.name)
    out = run_dir(args.out, "parity")
    env = variant_env(args, "patched" if args.patch else "base", device)
    runs = {}
    with Console() as console:
        for backend, variant_env_ in (("vllm", env), ("hf", installed_env(device))):
            console(f"run {backend} worker on {len(prompts)} prompts")
            job = parity_job(backend, model, dtype, prompts, args.max_tokens)
            runs[backend] = launch(job, variant_env_, out / backend, timeout_s=args.timeout,
                                   watch=console.watch(backend)).raise_for_error()
            console(f"{backend} worker done in {runs[backend].elapsed_s:.1f}s")
    summary = summarize(compare_greedy(runs["vllm"].results(), runs["hf"].results()))
    passed = summary.all_equal and summary.max_abs_dlogprob <= PARITY_LOGPROB_TOL_FP32
    (out / "parity.json").write_text(json.dumps({**asdict(summary), "passed": passed}, indent=2))
    print(f"parity {args.model} ({dtype}): {summary.tokens_equal}/{summary.requests} greedy sequences equal, "
          f"max |Δlogprob| {summary.max_abs_dlogprob:.2e} (tol {PARITY_LOGPROB_TOL_FP32:g}) → "
          f"{'PASS' if passed else 'FAIL'}")
    print(f"results: {out}")
    return 0 if passed else 1


def cmd_doctor(args: argparse.Namespace) -> int:
    device = detect_device()
    print(f"infercheck {__version__}  python {sys.version.split()[0]}  device {device}")
    engine = find_installed_engine()
    print(f"engine: {engine.distribution} {engine.version} at {engine.package_dir}")
    for limit in limitations_for(engine.version, device):
        print(f"  known limitation of this build (suites/engine_limits.yaml): {limit.line()}")
    out = run_dir(None, "doctor")
    from infercheck.run.probe import probe_env

    info = probe_env(installed_env(device), out / "probe")
    for key in ("vllm", "torch", "transformers", "lm_eval"):
        print(f"  {key:12s} {info.get(key)}")
    print(f"  accelerator  {info.get('device_name', 'cpu')}")
    healthy = True
    for name in zoo.bundled_names():
        ok, detail = zoo.verify(name)
        healthy &= ok
        print(f"model {name:16s} {'ok' if ok else 'PROBLEM'}: {detail}")
    tree = engine_tree()
    print(f"engine tree: {tree.repo_dir} ({tree.installed_commit[:12]})")
    from infercheck.run.launcher import containment_for, worker_view
    from infercheck.run.sandbox import describe
    from infercheck.run.view import WorkerView

    held = containment_for(Job("vllm", "", "float32", []), 900.0)
    print(f"worker containment: {describe(held.as_record())}")
    for note in held.notes:
        print(f"  note: {note}")
    model = str(zoo.model_dir("tiny-llama-add"))
    smoke = parity_job("vllm", model, "float32", ["12+34="], 4)
    view = worker_view(smoke, installed_env(device), out / "smoke", {})
    if isinstance(view, WorkerView):
        print(f"worker view: its inputs under {view.root}, hidden: {', '.join([*view.masks, *view.scratch])}")
    else:
        print(f"worker view: none ({view}); a patched worker can read the harness, cache and other runs")
    if args.no_smoke or not healthy:
        return 0 if healthy else 1
    run = launch(smoke, installed_env(device), out / "smoke", timeout_s=600).raise_for_error()
    result = run.results()[0]
    print(f"smoke: vllm answered {result.text!r} to '12+34=' in {run.elapsed_s:.1f}s (worker start included)")
    return 0


def ray_address(args: argparse.Namespace) -> str | None:
    """--ray-address, else a local instance for --ray, else None (no Ray)."""
    from infercheck.run.ray_pool import LOCAL  # the module imports Ray itself only when a pool starts

    address = getattr(args, "ray_address", None)
    return address or (LOCAL if getattr(args, "ray", False) else None)


def validate_options(args: argparse.Namespace) -> ValidateOptions:
    opts = ValidateOptions(patch=args.patch, base_patches=list(args.base_patch), engine_src=args.engine_src,
                           model=args.model or "tiny-llama-add", symptom=args.symptom,
                           suites=[s.strip() for s in args.suites.split(",") if s.strip()] if args.suites else None,
                           apps=[a.strip() for a in args.apps.split(",") if a.strip()] if args.apps else None,
                           out=args.out, fail_on=fail_on_list(args.fail_on),
                           timeout_s=args.timeout, reuse=not args.no_reuse,
                           engine_tests=not getattr(args, "no_engine_tests", False),
                           floor=not getattr(args, "no_floor", False),
                           ray=ray_address(args),
                           jobs=getattr(args, "jobs", None),
                           refuse_judge_edits=getattr(args, "refuse_judge_edits", False),
                           run_timeout_s=getattr(args, "run_timeout", None),
                           command="infercheck " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
                           seed=chosen_seed(getattr(args, "seed", None), os.environ))
    if args.case is not None:
        case = load_case(args.case)
        opts.base_patches = [*case.base_patches, *opts.base_patches]
        opts.model = args.model or case.model
        opts.symptom = args.symptom or case.symptom
        case_suites = list(case.suites) if opts.model == case.model else suites_for_model(
            list(case.suites), zoo.model_dir(opts.model).name)  # another model: the case's accuracy is its model's
        opts.suites = opts.suites or (case_suites or None)
        if opts.apps is None and case.apps is not None:
            opts.apps = list(case.apps) or ["none"]
        opts.case = case.id
        candidate = case.candidate_for(args.patch)
        opts.expected = candidate.expected if candidate else None
    opts.dtype = zoo.run_dtype(opts.model, args.dtype)  # the model's own where --dtype is not given
    return opts


def cmd_validate(args: argparse.Namespace) -> int:
    patches = args.patch if isinstance(args.patch, list) else [args.patch] if args.patch is not None else []
    if getattr(args, "resume", None) is not None:
        if patches:
            raise InfercheckError("give either a patch or --resume RUN_DIR (a resumed run keeps its own options)")
        opts = load_options(args.resume)
    elif not patches:
        raise InfercheckError("validate needs a patch (or --resume RUN_DIR)")
    elif len(patches) > 1 or patches[0].is_dir():
        return validate_many(args, patch_files(patches))
    else:
        opts = validate_options(argparse.Namespace(**{**vars(args), "patch": patches[0]}))
    with Console(quiet=args.quiet) as console:
        if getattr(args, "resume", None) is not None:
            console(f"resuming {args.resume}: {opts.command or opts.patch}")
        run, folder = validate(opts, console, console.live)
    return print_verdict(run, folder, args, opts.fail_on)


SAME_BASE_OPTIONS = ("case", "engine_src", "model", "symptom", "suites", "apps")  # what a candidate's base is


def one_candidate_command(args: argparse.Namespace, patch: Path) -> str:
    """The validate command of one candidate of a multi-candidate run, on its own (the pipeline
    appends the seed)."""
    parts = ["infercheck", "validate", str(patch)]
    parts += [a for p in args.base_patch for a in ("--base-patch", str(p))]
    parts += [a for name in SAME_BASE_OPTIONS if getattr(args, name, None) is not None
              for a in (f"--{name.replace('_', '-')}", str(getattr(args, name)))]
    if args.dtype is not None:
        parts += ["--dtype", args.dtype]
    return " ".join(shlex.quote(p) for p in parts)


def validate_many(args: argparse.Namespace, patches: list[Path]) -> int:
    """Several candidates against one base (infercheck/candidates.py): one report folder each under
    --out (default reports/<time>-candidates/), one prompt draw, and the ranking page; exits with the
    best candidate's code."""
    if getattr(args, "github", False):
        raise InfercheckError("--github takes one candidate per run (docs/ci.md runs one job per patch)")
    seed = chosen_seed(getattr(args, "seed", None), os.environ)
    seed = Draw.fresh().seed if seed is None else seed  # one draw for every candidate: base and reference are shared
    out = args.out or reports_dir() / f"{time.strftime('%Y%m%d-%H%M%S')}-candidates"
    if out.exists() and any(out.iterdir()) and not (out / CANDIDATES_JSON).is_file():
        raise InfercheckError(f"--out {out} holds something else than an earlier candidates run")

    def options(patch: Path, folder: Path) -> ValidateOptions:
        opts = validate_options(argparse.Namespace(**{**vars(args), "patch": patch, "out": folder, "seed": seed}))
        opts.command = one_candidate_command(args, patch)
        return opts

    base = f"case {load_case(args.case).id}" if args.case is not None else \
        "the engine" + "".join(f" + {p.name}" for p in args.base_patch)
    with Console(quiet=args.quiet) as console:
        console(f"{len(patches)} candidates against {base}, prompt draw seed {seed}")
        result = validate_candidates(patches, out, options, lambda opts: validate(opts, console, console.live),
                                     console, base)
    paths = write_candidates(result, out)
    if getattr(args, "json", False):
        print(paths["json"].read_text(), end="")
    else:
        print(ranking_text(result))
        print(f"ranking: {paths['html']}")
    return result.exit_code


def fail_on_list(text: str | None) -> list[str] | None:
    """--fail-on A,B → ["A", "B"]; None (the default: every verdict but RESOLVED/CLEAN) when not given."""
    names = [name.strip() for name in (text or "").split(",") if name.strip()]
    return names or None


def print_verdict(run: ValidationRun, folder: Path, args: argparse.Namespace, fail_on: list[str] | None) -> int:
    """The headline and every flag; with --json, verdict.json alone on stdout and the rest on stderr;
    with --github, what GitHub Actions reads (publish_to_github). Returns the verdict's exit code."""
    as_json = getattr(args, "json", False)
    lines = sys.stderr if as_json else sys.stdout
    if as_json:
        print((folder / REPORT_FILES["verdict"]).read_text(), end="")
    expected = f" (expected {run.expected})" if run.expected else ""
    print(f"{run.verdict.headline}{expected}: {folder / REPORT_FILES['html']}", file=lines)
    for flag in run.verdict.flags:
        print(f"  {flag.code}: {flag.message}", file=lines)
    if getattr(args, "github", False):
        publish_to_github(run, folder, fail_on, lines)
    return run.verdict.exit_code


def publish_to_github(run: ValidationRun, folder: Path, fail_on: list[str] | None, annotations_to: TextIO) -> None:
    """--github (docs/ci.md): one annotation per flag on `annotations_to` (the runner reads workflow
    commands from stdout and stderr alike), summary.md appended to $GITHUB_STEP_SUMMARY, and the
    headline and report folder appended to $GITHUB_OUTPUT when it is set."""
    for annotation in annotations(run.verdict, fail_on):
        print(annotation.line(), file=annotations_to)
    summary = (folder / REPORT_FILES["summary"]).read_text(encoding="utf-8")
    if os.environ.get(STEP_SUMMARY):
        append_to(STEP_SUMMARY, summary if summary.endswith("\n") else summary + "\n")
    else:
        print(f"infercheck: --github: ${STEP_SUMMARY} is not set (not a GitHub Actions step?): "
              f"no job summary written", file=sys.stderr)
    if os.environ.get(OUTPUT):
        append_to(OUTPUT, output_lines({"verdict": str(run.verdict.headline), "report": str(folder.resolve())}))


def append_to(variable: str, text: str) -> None:
    """Append to the file an environment variable names, as GitHub expects of its command files."""
    path = Path(os.environ[variable])
    try:
        with path.open("a", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise InfercheckError(f"--github: cannot append to ${variable} ({path}): {exc.strerror or exc}") from None


def cmd_regrade(args: argparse.Namespace) -> int:
    """Grade, verdict and report again from a run folder's stored worker results (no engine); --fail-on
    replaces the run's own failing verdicts for this grading."""
    fail_on = fail_on_list(args.fail_on) or load_options(args.folder, "regrade").fail_on
    run, folder = regrade(args.folder, fail_on)
    return print_verdict(run, folder, args, fail_on)


def cmd_report(args: argparse.Namespace) -> int:
    paths = render_from_dir(args.folder)
    if args.folder.resolve().parent == reports_dir().resolve():
        write_index(reports_dir())
    print(paths["html"])
    return 0


def cmd_neighbours(args: argparse.Namespace) -> int:
    """Print the apps and suites at risk for the files PATCH touches, most directly touched first."""
    patch = read_patch(args.patch)
    print(f"{args.patch}: touches {', '.join(patch.files)}")
    known = load_apps()
    hits = installed_code_map_hits(patch.text, list(patch.files))
    print(f"  changed functions: {', '.join(hits.changed) or 'none of a traced engine file'}; {hits.note}")
    for sel in select_neighbours(list(patch.files), hits=hits):
        files = f" ({', '.join(sel.files)})" if sel.files else ""
        missing = " [no such app or oracle in suites/]" if sel.kind in APP_LIKE and sel.name not in known else ""
        print(f"  {sel.kind:6s} {sel.name:28s} {'; '.join(sel.reasons)}{files}{missing}")
    print_engine_tests(patch)
    return 0


def print_engine_tests(patch: PatchFile) -> None:
    """The engine's own tests `validate` would run for the patch, per file, with why."""
    tests = engine_test_tree(engine_tree(), find_installed_engine())
    if isinstance(tests, str):
        print(f"  engine tests: skipped, {tests}")
        return
    selection = select_engine_tests(patch.text, list(patch.files), tests)
    print(f"  engine tests ({tests.label}): {len(selection.node_ids())} test function(s) in {len(selection.files)} file(s)"
          + (f"; {selection.note}" if selection.note else ""))
    for selected in selection.files:
        print(f"    {selected.path}: {len(selected.tests)} test function(s); {'; '.join(selected.reasons)}")


def cmd_codemap(args: argparse.Namespace) -> int:
    """Record the code map of the installed engine (infercheck/codemap_run.py)."""
    from infercheck.codemap_run import build_codemap

    work = args.work or cache_dir() / "codemap-run"
    codemap, path = build_codemap(work, args.timeout, progress, args.out, args.reuse, args.add)
    sizes = ", ".join(f"{app} {len(f)}" for app, f in sorted(codemap.reach.items()))
    print(f"{path}: {codemap.engine}; baseline {len(codemap.baseline)} functions; reach: {sizes}")
    return 0


DEMO_CASE = PATCHES_DIR / "rotary-half-precision-cache"


def cmd_demo(args: argparse.Namespace) -> int:
    """Validate one bundled candidate and print the report path."""
    case = load_case(DEMO_CASE)
    candidate = case.candidates[0]
    demo = argparse.Namespace(patch=candidate.patch, base_patch=[], engine_src=None, model=None, dtype=None,
                              symptom=None, case=DEMO_CASE, suites=None, apps=None, out=None, fail_on=None, timeout=900.0,
                              no_reuse=False, json=False, quiet=args.quiet)
    if not args.quiet:
        progress(f"demo: validating {candidate.patch.relative_to(PATCHES_DIR.parent)} against case {case.id}")
    code = cmd_validate(demo)
    return 0 if code in (0, 1) else code


def cmd_perf(args: argparse.Namespace) -> int:
    """Measure where a validate's time goes (infercheck/perf.py) and write the medians as JSON."""
    from infercheck.perf import perf_plan, perf_text, run_perf, write_perf

    out = args.out or reports_dir() / "bench-perf.json"
    work = out.with_suffix("") / time.strftime("%Y%m%d-%H%M%S")
    cache = cache_dir()
    plan = perf_plan(args.case or DEMO_CASE, args.runs, chosen_seed(args.seed, os.environ), work,
                     args.cache_root or cache.with_name(f"{cache.name}-perf"))
    with Console(quiet=args.quiet) as console:
        console(f"perf: {plan.case.name}, {plan.rounds} round(s), seed {plan.seed}; run folders in {work}")
        result = run_perf(plan, progress=console)
    print(perf_text(result))
    print(f"written: {write_perf(result, out)}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    """Validate the bundled candidates, print the confusion matrix and timings, write the bench page."""
    from infercheck.bench import BUG, load_cases, run_bench
    from infercheck.run.cancel import Cancel

    cases = load_cases(args.root or PATCHES_DIR, [c.strip() for c in args.cases.split(",") if c.strip()]
                       if args.cases else None)
    out = args.out or reports_dir() / "bench"
    seed = chosen_seed(args.seed, os.environ)  # one draw for every candidate: base and reference are shared

    def options(case, candidate, folder: Path) -> ValidateOptions:
        ns = argparse.Namespace(patch=candidate.patch, base_patch=[], engine_src=None, model=None, dtype=None,
                                symptom=None, case=case.folder, suites=None, apps=None, out=folder, fail_on=None,
                                timeout=args.timeout, no_reuse=args.no_reuse, json=False, seed=seed, jobs=args.jobs,
                                ray=args.ray, ray_address=args.ray_address)
        opts = validate_options(ns)
        opts.command = f"infercheck validate {shlex.quote(str(candidate.patch))} --case {shlex.quote(str(case.folder))}"
        if candidate.name == BUG:  # the bug itself, on the clean engine
            opts.base_patches, opts.expected = [], None
            opts.command = (f"infercheck validate {shlex.quote(str(candidate.patch))} --symptom "
                            f"{shlex.quote(str(case.symptom))} --model {case.model}")
        return opts

    streams = args.jobs or default_jobs(detect_device())
    with Console(quiet=args.quiet) as console:
        console(f"bench: prompt draw seed {seed}, {streams} worker(s) side by side")
        live = console.live if streams == 1 else None  # one live line per worker name: a single stream's
        cancel = Cancel()  # one for every stream: an interruption stops them all
        result = run_bench(cases, out, options, lambda opts: validate(opts, console, live, cancel), console,
                           reuse=not args.no_reuse, quick=args.quick, bug_checks=not args.no_bug_checks, seed=seed,
                           streams=streams, cancel=cancel)
    return bench_summary(result, out)


def bench_summary(result: BenchResult, out: Path) -> int:
    """Write a bench's page and JSON, print its matrix, per-case time and mismatches; 1 if any."""
    from infercheck.bench import matrix_text, write_bench

    paths = write_bench(result, out)
    print(matrix_text(result.rows))
    for case, seconds in result.case_seconds().items():
        print(f"  {case}: {seconds:.0f}s")
    for row in result.mismatches:
        print(f"  MISMATCH {row.case}/{row.candidate}: expected {row.expected}, got {row.got} ({out / row.report})")
    print(f"{len(result.rows) - len(result.mismatches)}/{len(result.rows)} as expected in {result.wall_s:.0f}s "
          f"(prompt draw seed {result.seed}): "
          f"{paths['index.html']}")
    return 1 if result.mismatches else 0


def cmd_bench_merge(args: argparse.Namespace) -> int:
    """Merge bench folders of one seed into one bench (docs/design.md, "Prompt draws")."""
    from infercheck.bench_merge import load_bench, merge_benches

    parts = [(folder, load_bench(folder)) for folder in args.folders]
    return bench_summary(merge_benches(parts, args.out), args.out)
