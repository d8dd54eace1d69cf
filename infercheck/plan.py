"""Plan: which suites run, and the worker jobs that carry them, grouped by engine config.

The engine job is the same for base and patched: one group per distinct engine-args set, each
holding the generation requests of the suites that use it (and the lm-eval tasks, on the default
group). Reference jobs: one per variant, built after its engine run, re-scores that variant's
continuations (teacher forcing, deduplicated); one more runs the lm-eval tasks through HF.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import yaml

from infercheck.app_ids import app_of
from infercheck.models import zoo
from infercheck.apps import AppSet, ModelFacts, app_sets
from infercheck.draw import Draw
from infercheck.checks.comparators import (needs_continuations, needs_full_distributions, needs_processing,
                                           needs_prompt_scoring, needs_reference)
from infercheck.intake import Intake
from infercheck.names import PROMPTLESS_SYMPTOMS, SuiteKind, SymptomKind
from infercheck.paths import SUITES_DIR
from infercheck.prompts import Prompt, build_prompts
from infercheck.run.job import ENGINE_PACKAGE, Group, Job, LmEvalTask, Request, RequestResult
from infercheck.specs import DEFAULT_TOP_K, App, Suite, SymptomSpec

SYMPTOM = "symptom"


@dataclass
class Workload:
    """Generation requests of one suite (or the symptom) under one engine config."""

    name: str  # suite name or "symptom"
    engine_args: dict[str, Any]
    prompts: list[Prompt]
    max_tokens: int
    top_k: int = DEFAULT_TOP_K
    sampling: dict[str, Any] = field(default_factory=dict)

    def request_id(self, prompt: Prompt) -> str:
        return f"{self.name}#{prompt.id}"

    def requests(self) -> list[Request]:
        sampling = {"max_tokens": self.max_tokens, "temperature": 0.0, "ignore_eos": True, **self.sampling}
        return [Request(id=self.request_id(p), prompt=p.text, sampling=sampling, logprobs=self.top_k)
                for p in self.prompts]


@dataclass(frozen=True)
class EngineTestsPlan:
    """What the run stage needs to select the engine's own tests (neighbours.select_engine_tests):
    the patch, and the engine sources its old side is read from."""

    patch_text: str
    files: tuple[str, ...]
    engine_src: Path | None = None


@dataclass
class Plan:
    model: str  # folder
    model_name: str
    dtype: str
    suites: list[Suite]
    symptom: SymptomSpec | None
    workloads: list[Workload]
    tasks: list[LmEvalTask]
    apps: list[App] = field(default_factory=list)
    app_reasons: dict[str, str] = field(default_factory=dict)  # app name -> why it was selected
    app_models: dict[str, str] = field(default_factory=dict)  # app name -> model folder
    trace: list[str] = field(default_factory=list)  # engine files whose executed lines the workers record
    draw: Draw = field(default_factory=Draw)  # the run's prompt draw (draw.py)
    engine_tests: EngineTestsPlan | None = None  # the engine's own tests of the touched modules; None: not run

    def app_sets(self) -> dict[str, list[AppSet]]:
        return {app.name: app_sets(app, ModelFacts.of(self.app_models[app.name]), self.draw) for app in self.apps}

    def accuracy_suites(self) -> list[Suite]:
        return [s for s in self.suites if s.kind == SuiteKind.ACCURACY]

    def parity_suites(self) -> list[Suite]:
        return [s for s in self.suites if s.kind == SuiteKind.PARITY]

    def prompts(self) -> dict[str, Prompt]:
        """Engine request id -> its prompt, for every generation workload."""
        return {w.request_id(p): p for w in self.workloads for p in w.prompts}

    def reported_prompts(self) -> list[str]:
        return [p.text for w in self.workloads if w.name == SYMPTOM for p in w.prompts]

    def set_models(self) -> dict[str, str]:
        """App request id -> its set's own model folder, for the sets that have one."""
        return {r.id: s.model for sets in self.app_sets().values() for s in sets if s.model for r in s.requests}

    def sampling_params(self) -> dict[str, dict[str, Any]]:
        """App request id -> its sampling params."""
        return {r.id: r.sampling for sets in self.app_sets().values() for s in sets for r in s.requests}


def plan_for(found: Intake, inputs_dir: Path | None = None) -> Plan:
    """Stage 2: the plan for an intake (lm-eval tasks staged into inputs_dir when given)."""
    plan = make_plan(str(found.model_dir), found.model_name, found.opts.dtype, found.suites, found.symptom,
                     inputs_dir, found.apps, found.app_reasons, zoo.model_dir, found.draw)
    plan.trace = traced_files(found.patch.classes)
    if found.opts.engine_tests:
        plan.engine_tests = EngineTestsPlan(found.patch.text, tuple(found.patch.files), found.opts.engine_src)
    return plan


def traced_files(classes: dict[str, str]) -> list[str]:
    """The engine's Python files a patch touches: what the workers trace (docs/design.md, "Code-path
    evidence"); compiled code, tests and docs are not traced."""
    return sorted(f for f, cls in classes.items() if cls == "python" and f.startswith("vllm/"))


def make_plan(model: str, model_name: str, dtype: str, suites: list[Suite], symptom: SymptomSpec | None,
              inputs_dir: Path | None = None, apps: list[App] | None = None,
              app_reasons: dict[str, str] | None = None, model_dir: Callable[[str], Path] | None = None,
              draw: Draw = Draw()) -> Plan:
    """The plan under a prompt draw; lm-eval tasks are staged into inputs_dir when given (else later,
    by stage_plan)."""
    workloads = [Workload(s.name, dict(s.engine_args), build_prompts(s.prompts, draw), s.max_tokens, s.top_k)
                 for s in suites if s.kind == SuiteKind.PARITY]
    if symptom is not None and symptom.kind not in PROMPTLESS_SYMPTOMS:
        workloads.append(Workload(SYMPTOM, dict(symptom.engine_args), build_prompts(symptom.prompts, draw),
                                  symptom.max_tokens, DEFAULT_TOP_K, dict(symptom.sampling)))
    apps = apps or []
    app_models = {a.name: str(model_dir(a.model)) if a.model and model_dir else model for a in apps}
    plan = Plan(model, model_name, dtype, suites, symptom, workloads, [], apps, dict(app_reasons or {}), app_models,
                draw=draw)
    if inputs_dir is not None:
        stage_plan(plan, inputs_dir)
    return plan


def stage_plan(plan: Plan, inputs_dir: Path) -> None:
    accuracy = plan.accuracy_suites()
    plan.tasks = stage_tasks(accuracy, inputs_dir, plan.draw) if accuracy else []


def stage_tasks(suites: list[Suite], inputs_dir: Path, draw: Draw = Draw()) -> list[LmEvalTask]:
    """Copy the lm-eval task YAML and its data into the run folder's tasks/, data paths relative to
    the task folder (a worker resolves them: the folder is bound elsewhere in its view, run/view.py).
    Each data file's rows are written in the draw's order, so a task's `limit` and its few-shot
    sampling take other instances under another draw; each task carries the staged data's digest
    (the cache keys on what was staged, not on the bundled files)."""
    tasks_dir = inputs_dir / "tasks"
    tasks_dir.mkdir(parents=True, exist_ok=True)
    staged = hashlib.sha256()
    for src in sorted((SUITES_DIR / "accuracy" / "tasks").glob("*.yaml")):
        spec = yaml.safe_load(src.read_text())
        files = (spec.get("dataset_kwargs") or {}).get("data_files") or {}
        for split, rel in files.items():
            target = tasks_dir / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            rows = (SUITES_DIR / rel).read_text().splitlines(keepends=True)
            text = "".join(draw.order(rows, rel))
            target.write_text(text)
            staged.update(f"{rel}\0{text}\0".encode())
            files[split] = rel
        (tasks_dir / src.name).write_text(yaml.safe_dump(spec, sort_keys=False))
    return [LmEvalTask(name=s.task, label=s.name, include_path=str(tasks_dir), metrics=[s.metric], limit=s.limit,
                       num_fewshot=s.num_fewshot, include_defaults=s.standard, data_digest=staged.hexdigest()[:16])
            for s in suites]


def engine_job(plan: Plan, backend: str = "vllm") -> Job:
    groups: dict[str, Group] = {}
    for workload in plan.workloads:
        key = json.dumps(workload.engine_args, sort_keys=True)
        group = groups.setdefault(key, Group(f"g{len(groups)}", workload.engine_args, []))
        group.requests.extend(workload.requests())
    if plan.tasks:
        default = groups.setdefault(json.dumps({}), Group(f"g{len(groups)}", {}, []))
        default.lm_eval = list(plan.tasks)
    app_groups: dict[str, Group] = {}
    for app_name, sets in plan.app_sets().items():  # each app on engines of its own: its metrics are its own
        for app_set in sets:
            model = app_set.model or plan.app_models[app_name]
            key = json.dumps([app_name, app_set.engine_args, model], sort_keys=True)
            group = app_groups.setdefault(key, Group(f"app:{app_name}:{app_set.name}", app_set.engine_args, [],
                                                     model=model, isolated=True))
            group.requests.extend(app_set.requests)
    return Job(backend, plan.model, plan.dtype, [*groups.values(), *app_groups.values()],
               trace=[ENGINE_PACKAGE] if plan.trace else [], sources=list(plan.trace))


ALONE = ":alone"  # suffix of a noise-floor group (and its request ids) run one at a time, in reverse order


def parity_workloads(plan: Plan) -> list[str]:
    """The workloads judged by teacher-forced parity: the parity suites, and a parity symptom."""
    names = [s.name for s in plan.parity_suites()]
    if plan.symptom is not None and plan.symptom.kind == SymptomKind.PARITY:
        names.append(SYMPTOM)
    return names


def floor_job(plan: Plan, backend: str = "vllm", batched: bool = True) -> Job | None:
    """The noise-floor job (checks/noise_floor.py), run on the unmodified engine: each engine group's
    parity requests as the engine job batches them, and again alone (`max_num_seqs` 1) in reverse
    order, so the floor holds the batch-composition noise too. `batched` False: the alone groups
    only (base is the unmodified engine: its own run is the batched one). None: no parity workload."""
    wanted = set(parity_workloads(plan))
    groups = []
    for group in engine_job(plan, backend).groups:
        requests = [r for r in group.requests if not group.isolated and r.id.split("#", 1)[0] in wanted]
        if requests:
            if batched:
                groups.append(Group(group.name, group.engine_args, requests))
            groups.append(Group(group.name + ALONE, {**group.engine_args, "max_num_seqs": 1},
                                [replace(r, id=r.id + ALONE) for r in requests[::-1]]))
    return Job(backend, plan.model, plan.dtype, groups) if groups else None


def group_checks(job: Job) -> dict[str, list[str]]:
    """Engine group name -> the checks its requests and lm-eval tasks serve (a request id starts
    with its check's or workload's name: "app/x#set/key", "symptom#p0", "parity/addition#p3")."""
    return {g.name: sorted({r.id.split("#", 1)[0] for r in g.requests} | {t.label for t in g.lm_eval})
            for g in job.groups}


@dataclass(frozen=True)
class ReferenceSpec:
    """How the reference scores one engine result."""

    model: str  # model folder
    full: bool  # the whole vocabulary at each position, not only the engine's top-k
    processed: bool  # also rebuild the request's logits processing (the sampling oracle)
    prompts: bool = False  # also score every prompt position, at the engine's prompt top-k (the position oracle)
    continuation: bool = True  # False: the prompt positions are all its checks read (not the engine's outputs)

    def outputs(self, result: RequestResult) -> list[int]:
        """The engine's output tokens the scoring re-scores (none for a prompt-only scoring)."""
        return result.output_ids if self.continuation else []

    def candidates(self, result: RequestResult) -> list[list[int]] | None:
        """The engine's top-k ids at each output position the scoring adds (None: not asked for)."""
        if self.full or not self.continuation:
            return None
        return [[int(t) for t, _ in pos] for pos in result.logprobs or []]


def reference_spec(plan: Plan, result_id: str, set_models: dict[str, str] | None = None) -> ReferenceSpec | None:
    """How to score a result, or None when no check needs it (the comparator registry says which app
    comparators need the reference, and how much of it); set_models: request id -> the model folder
    of its set where the set has one (a config variant), from `Plan.set_models`."""
    name = app_of(result_id)
    if name is None:
        return ReferenceSpec(plan.model, False, False)
    app = next((a for a in plan.apps if a.name == name), None)
    if app is None or not needs_reference(app.compare):
        return None
    model = (set_models or {}).get(result_id) or plan.app_models[app.name]
    return ReferenceSpec(model, needs_full_distributions(app.compare), needs_processing(app.compare),
                         needs_prompt_scoring(app.compare), needs_continuations(app.compare))


def scoring_key(result: RequestResult, spec: ReferenceSpec, processors: dict[str, Any] | None,
                sent_ids: list[int] | None = None) -> str:
    """What a reference scoring depends on; the model by name, so a run folder read on another
    checkout (regrade of a recorded run) pairs its rows the same way. `sent_ids`: the token ids the
    harness sent, which the reference scores in place of the ids the engine reports (equal for an
    engine that leaves its prompt alone, so the key is the same). A text prompt is keyed by the
    engine's tokenization of it (the key needs no tokenizer, and recorded runs keep their ids): only
    an engine that reports one tokenization for two different texts, so has altered at least one,
    gets both scored against the first text."""
    # A prompt-only scoring has no outputs or candidates: the same scoring for every engine.
    prompt = result.prompt_ids if sent_ids is None else sent_ids
    key: list[Any] = [Path(spec.model).name, spec.full, prompt, spec.outputs(result),
                      spec.candidates(result) or []]
    if processors is not None:  # appended only here: the ids of every other scoring stay as recorded
        key.append(processors)
    if spec.prompts:
        key.append(["prompt", prompt_top_k(result)])
    return json.dumps(key, sort_keys=True)


def prompt_top_k(result: RequestResult) -> int:
    """How many prompt logprobs per position the engine listed (its top-k, the prompt token aside)."""
    return max((len(row) for row in result.prompt_logprobs or [] if row), default=1)


def reference_prompt_logprobs(result: RequestResult, spec: ReferenceSpec) -> int | None:
    """The prompt logprobs to ask the reference for: the whole vocabulary for full scorings of a
    result that has them, the engine's own top-k where a comparator scores prompt positions."""
    if not result.prompt_logprobs:
        return None
    return -1 if spec.full else prompt_top_k(result) if spec.prompts else None


PROCESSING_FREE = ("max_tokens", "ignore_eos", "n", "seed", "logprobs", "prompt_logprobs")


def processing_params(sampling: dict[str, Any]) -> dict[str, Any]:
    """The sampling params that shape the next-token distribution (what the reference rebuilds)."""
    return {k: v for k, v in sampling.items() if k not in PROCESSING_FREE}


def reference_job(plan: Plan, results: list[RequestResult]) -> tuple[Job, dict[str, str]]:
    """Teacher-forced scoring of one variant's continuations, one reference group per engine group,
    with ids derived from what is scored: a group's scoring depends only on its engine group's
    outputs, so the cache reuses it across every candidate of a case that leaves those outputs alone.

    The reference reads the prompt the harness sent (its text, tokenized by the reference's own
    tokenizer, or its token ids), not the prompt ids the engine reports: an engine that alters its
    prompt (drops, truncates, appends, re-tokenizes) is scored against what a user asked. Only an
    agent session's later turns, whose context holds the engine's own earlier answers, are scored on
    the context the engine reports.

    Returns the job and the map from engine request id to reference request id.
    """
    sent = {r.id: r for g in engine_job(plan).groups for r in g.requests if not r.turns}
    groups: dict[str, Group] = {}
    id_map: dict[str, str] = {}
    scored: set[str] = set()
    params = plan.sampling_params() if any(needs_processing(a.compare) for a in plan.apps) else {}
    set_models = plan.set_models()
    for result in results:
        spec = reference_spec(plan, result.id, set_models)
        if spec is None:
            continue
        processors = processing_params(params.get(result.id, {})) if spec.processed else None
        request = sent.get(result.id)
        text = request.prompt if request is not None and request.prompt_token_ids is None else None
        ids = None if text is not None else list(request.prompt_token_ids) if request is not None else result.prompt_ids
        key = scoring_key(result, spec, processors, ids)
        name = f"reference:{result.group}:{Path(spec.model).name}"
        group = groups.setdefault(name, Group(name, {}, [], model=spec.model))
        ref_id = f"{result.group}/r{hashlib.sha256(key.encode()).hexdigest()[:16]}"
        if ref_id not in scored:
            scored.add(ref_id)
            outputs = spec.outputs(result)
            group.requests.append(Request(
                id=ref_id, prompt=text, prompt_token_ids=ids, continuation_ids=outputs,
                candidate_ids=spec.candidates(result), logprobs=-1 if spec.full else 1,
                prompt_logprobs=reference_prompt_logprobs(result, spec), sampling={"max_tokens": len(outputs)},
                processors=processors))
        id_map[result.id] = ref_id
    ordered = [g for _, g in sorted(groups.items())]
    for group in ordered:
        group.requests.sort(key=lambda r: r.id)
    return Job("hf", plan.model, "float32", ordered), id_map


def reference_eval_job(plan: Plan) -> Job | None:
    """lm-eval through the HF reference: independent of the engine runs, so reused across patches."""
    if not plan.tasks:
        return None
    return Job("hf", plan.model, "float32", [Group("reference-eval", {}, [], list(plan.tasks))])
