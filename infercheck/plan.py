"""Plan: which suites run, and the worker jobs that carry them, grouped by engine config.

The engine job is the same for base and patched: one group per distinct engine-args set, each
holding the generation requests of the suites that use it (and the lm-eval tasks, on the default
group). Reference jobs: one per variant, built after its engine run, re-scores that variant's
continuations (teacher forcing, deduplicated); one more runs the lm-eval tasks through HF.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from infercheck.apps import App, AppSet, app_sets, parse_id
from infercheck.paths import SUITES_DIR
from infercheck.prompts import Prompt, build_prompts
from infercheck.run.job import Group, Job, LmEvalTask, Request, RequestResult
from infercheck.suites import PROMPTLESS_SYMPTOMS, Suite, SymptomSpec

SYMPTOM = "symptom"
DEFAULT_TOP_K = 20


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

    def app_sets(self) -> dict[str, list[AppSet]]:
        return {app.name: app_sets(app) for app in self.apps}

    def accuracy_suites(self) -> list[Suite]:
        return [s for s in self.suites if s.kind == "accuracy"]

    def parity_suites(self) -> list[Suite]:
        return [s for s in self.suites if s.kind == "parity"]


def make_plan(model: str, model_name: str, dtype: str, suites: list[Suite], symptom: SymptomSpec | None,
              inputs_dir: Path | None = None, apps: list[App] | None = None,
              app_reasons: dict[str, str] | None = None, model_dir: Callable[[str], Path] | None = None) -> Plan:
    """The plan; lm-eval tasks are staged into inputs_dir when given (else later, by stage_plan)."""
    workloads = [Workload(s.name, dict(s.spec.get("engine_args") or {}), build_prompts(s.spec["prompts"]),
                          int(s.spec.get("max_tokens", 8)), int(s.spec.get("top_k", DEFAULT_TOP_K)))
                 for s in suites if s.kind == "parity"]
    if symptom is not None and symptom.kind not in PROMPTLESS_SYMPTOMS:
        workloads.append(Workload(SYMPTOM, dict(symptom.engine_args), build_prompts(symptom.prompts),
                                  symptom.max_tokens, DEFAULT_TOP_K, dict(symptom.sampling)))
    apps = apps or []
    app_models = {a.name: str(model_dir(a.model)) if a.model and model_dir else model for a in apps}
    plan = Plan(model, model_name, dtype, suites, symptom, workloads, [], apps, dict(app_reasons or {}), app_models)
    if inputs_dir is not None:
        stage_plan(plan, inputs_dir)
    return plan


def stage_plan(plan: Plan, inputs_dir: Path) -> None:
    accuracy = plan.accuracy_suites()
    plan.tasks = stage_tasks(accuracy, inputs_dir) if accuracy else []


def stage_tasks(suites: list[Suite], inputs_dir: Path) -> list[LmEvalTask]:
    """Copy the lm-eval task YAML and its data into the run folder, data paths made absolute."""
    tasks_dir = inputs_dir / "tasks"
    tasks_dir.mkdir(parents=True, exist_ok=True)
    for src in sorted((SUITES_DIR / "accuracy" / "tasks").glob("*.yaml")):
        spec = yaml.safe_load(src.read_text())
        files = (spec.get("dataset_kwargs") or {}).get("data_files") or {}
        for split, rel in files.items():
            target = inputs_dir / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(SUITES_DIR / rel, target)
            files[split] = str(target)
        (tasks_dir / src.name).write_text(yaml.safe_dump(spec, sort_keys=False))
    return [LmEvalTask(name=s.spec["task"], label=s.name, include_path=str(tasks_dir), metrics=[s.spec["metric"]],
                       limit=s.spec.get("limit"), num_fewshot=s.spec.get("num_fewshot"),
                       include_defaults=s.standard) for s in suites]


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
            key = json.dumps([app_name, app_set.engine_args], sort_keys=True)
            group = app_groups.setdefault(key, Group(f"app:{app_name}:{app_set.name}", app_set.engine_args, [],
                                                     model=plan.app_models[app_name], isolated=True))
            group.requests.extend(app_set.requests)
    return Job(backend, plan.model, plan.dtype, [*groups.values(), *app_groups.values()])


# Comparators that need the reference's view of an app's outputs; those needing full distributions.
REFERENCE_COMPARATORS = {"reference", "sampler", "logprobs", "structured"}
FULL_DISTRIBUTION_COMPARATORS = {"sampler", "logprobs", "structured"}


def reference_spec(plan: Plan, result_id: str) -> tuple[str, bool] | None:
    """(model folder, full distributions?) to score a result with, or None when no check needs it."""
    parsed = parse_id(result_id)
    if parsed is None:
        return plan.model, False
    app = next((a for a in plan.apps if a.name == parsed[0]), None)
    if app is None or not REFERENCE_COMPARATORS & set(app.compare):
        return None
    return plan.app_models[app.name], bool(FULL_DISTRIBUTION_COMPARATORS & set(app.compare))


def scoring_key(result: RequestResult, model: str, full: bool) -> str:
    candidates = [] if full else [[int(t) for t, _ in pos] for pos in result.logprobs or []]
    return json.dumps([model, full, result.prompt_ids, result.output_ids, candidates])


def reference_job(plan: Plan, results: list[RequestResult]) -> tuple[Job, dict[str, str]]:
    """Teacher-forced scoring of one variant's continuations, one reference group per engine group,
    with ids derived from what is scored: a group's scoring depends only on its engine group's
    outputs, so the cache reuses it across every candidate of a case that leaves those outputs alone.

    Returns the job and the map from engine request id to reference request id.
    """
    groups: dict[str, Group] = {}
    id_map: dict[str, str] = {}
    scored: set[str] = set()
    for result in results:
        spec = reference_spec(plan, result.id)
        if spec is None:
            continue
        model, full = spec
        key = scoring_key(result, model, full)
        name = f"reference:{result.group}:{Path(model).name}"
        group = groups.setdefault(name, Group(name, {}, [], model=model))
        ref_id = f"{result.group}/r{hashlib.sha256(key.encode()).hexdigest()[:16]}"
        if ref_id not in scored:
            scored.add(ref_id)
            group.requests.append(Request(
                id=ref_id, prompt_token_ids=result.prompt_ids, continuation_ids=result.output_ids,
                candidate_ids=None if full else [[int(t) for t, _ in pos] for pos in result.logprobs or []],
                logprobs=-1 if full else 1, prompt_logprobs=-1 if full and result.prompt_logprobs else None,
                sampling={"max_tokens": len(result.output_ids)}))
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
