"""Job files: plain JSON a worker subprocess reads (model, dtype, engine-args groups, requests).

A job has one or more groups; each group is one engine instance (its engine args) shared by all
of its requests. Results are JSONL, one line per request, streamed as they finish.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable

from infercheck.errors import InfercheckError

BACKENDS = ("vllm", "hf")


class WorkerInputError(Exception):
    """Bad job input found inside the worker (e.g. an unknown engine argument); `kind` names it."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class Request:
    id: str
    prompt: str | None = None
    prompt_token_ids: list[int] | None = None
    sampling: dict[str, Any] = field(default_factory=lambda: {"max_tokens": 8, "temperature": 0.0})
    logprobs: int | None = None  # top-k logprobs per generated position
    prompt_logprobs: int | None = None
    # Reference scoring: re-score this continuation (teacher forcing) instead of generating,
    # reporting at each position the logprobs of candidate_ids[t] (the engine's top-k) too.
    continuation_ids: list[int] | None = None
    candidate_ids: list[list[int]] | None = None
    # Sampling oracle: also rebuild, at each position, the logits processing these sampling params
    # ask for (the engine request's own; run/hf_processors.py) and report raw and processed logits.
    processors: dict[str, Any] | None = None
    # Requests of a group are submitted in waves (ascending): one generate call per wave, so "one at
    # a time" is one request per wave and "a burst" is many in one wave.
    wave: int = 0
    # A session (agent loop): before generating turn t, turns[t] is appended to the context, and each
    # turn's output stays in the context; one result per turn, id "<id>.t<NN>".
    turns: list[str] | None = None
    # Prefix-cache salt (vLLM's `cache_salt`): only requests of the same salt share cached blocks.
    cache_salt: str | None = None
    # Rows joining a running batch: the request enters the engine once this many engine steps of its
    # wave have run (0: before the first). A wave holding a later joiner runs step by step.
    join_step: int = 0

    def __post_init__(self) -> None:
        if (self.prompt is None) == (self.prompt_token_ids is None):
            raise InfercheckError(f"request {self.id}: give exactly one of prompt, prompt_token_ids")


@dataclass
class LmEvalTask:
    """An lm-eval task run inside the worker against its live engine (or the HF reference)."""

    name: str  # lm-eval task name
    label: str  # the infercheck suite it serves (a task may serve several, e.g. 0- and 60-shot)
    include_path: str  # folder with the task YAML (staged into the run folder)
    metrics: list[str] = field(default_factory=lambda: ["exact_match", "acc"])
    limit: int | None = None
    num_fewshot: int | None = None
    include_defaults: bool = False  # True only for standard hub tasks
    data_digest: str = ""  # digest of the staged data (rows in the run's draw order): part of the cache key


@dataclass
class Group:
    name: str
    engine_args: dict[str, Any]
    requests: list[Request]
    lm_eval: list[LmEvalTask] = field(default_factory=list)
    model: str | None = None  # overrides the job's model (e.g. an app pinned to the sliding-window model)
    # An isolated group's failure (the engine refusing its config, a crash in its workload) is recorded
    # on its GroupResult and the job goes on; a non-isolated group's failure ends the job.
    isolated: bool = False


@dataclass
class Job:
    backend: str  # "vllm" | "hf"
    model: str
    dtype: str
    groups: list[Group]
    seed: int = 0
    # Source files or folders whose executed lines the worker records per group (coverage.py) into
    # TRACE; a relative path is one of the engine's ("vllm/v1/..."); empty: no tracing
    # (docs/design.md, "Code-path evidence").
    trace: list[str] = field(default_factory=list)
    # The engine files whose executed lines and text the run folder keeps (TRACE narrowed to them,
    # SOURCES): the patch's. Not part of a group's identity: every candidate's workers trace the
    # whole engine package alike (`trace`), so a base computed for one candidate serves the next.
    sources: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise InfercheckError(f"unknown backend {self.backend!r} (expected one of {', '.join(BACKENDS)})")
        ids = [r.id for g in self.groups for r in g.requests]
        if len(ids) != len(set(ids)):
            raise InfercheckError("request ids must be unique within a job")

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    def digests(self) -> dict[str, Any]:
        """{"settings": digest of backend, model, dtype and seed, "groups": {name: digest of the group}}:
        equal digests mean the same work, without naming a path."""
        digest = lambda value: hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:24]
        return {"settings": digest([self.backend, self.model, self.dtype, self.seed]),
                "groups": {g.name: digest(asdict(g)) for g in self.groups}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Job":
        try:
            groups = [Group(g["name"], dict(g.get("engine_args") or {}), [Request(**r) for r in g["requests"]],
                            [LmEvalTask(**t) for t in g.get("lm_eval") or []], g.get("model"),
                            bool(g.get("isolated", False)))
                      for g in data["groups"]]
            return cls(data["backend"], data["model"], data.get("dtype", "float32"), groups, data.get("seed", 0),
                       list(data.get("trace") or []), list(data.get("sources") or []))
        except (KeyError, TypeError) as exc:
            raise InfercheckError(f"malformed job: {exc}") from None

    @classmethod
    def load(cls, path: Path) -> "Job":
        try:
            return cls.from_dict(json.loads(Path(path).read_text()))
        except (OSError, json.JSONDecodeError) as exc:
            raise InfercheckError(f"cannot read job file {path}: {exc}") from None


@dataclass
class RequestResult:
    """One request's raw outcome. Logprob positions are [[token_id, logprob], ...], best first."""

    id: str
    group: str
    prompt_ids: list[int]
    output_ids: list[int]
    text: str
    finish_reason: str | None
    logprobs: list[list[list[float]]] | None = None
    chosen_logprobs: list[float] | None = None  # logprob of each output token
    prompt_logprobs: list[list[list[float]] | None] | None = None
    elapsed_s: float = 0.0
    pieces: dict[str, str] = field(default_factory=dict)  # token id -> decoded text, for reports
    # n > 1: every completion as {"ids": [...], "text": ..., "finish_reason": ..., "stop_reason": ...}
    completions: list[dict[str, Any]] | None = None
    wave: int = 0
    # Reference scoring with `processors`: per output position, the logits over the whole vocabulary
    # (by token id) before and after the request's processing (-inf = masked), and the tokens within
    # a hair of a top_p / min_p cut (either side is right for them).
    raw_logits: list[list[float]] | None = None
    processed_logits: list[list[float]] | None = None
    borderline: list[list[int]] | None = None
    num_cached_tokens: int | None = None  # prompt tokens the engine's prefix cache served
    cache_salt: str | None = None  # the request's, as sent

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RequestResult":
        return cls(**data)


@dataclass
class GroupResult:
    name: str
    engine_args: dict[str, Any]
    num_requests: int
    prompt_tokens: int
    output_tokens: int
    elapsed_s: float
    startup_s: float
    metrics: dict[str, float] = field(default_factory=dict)
    # One row per generate call: {"wave", "step", "requests", "prompt_tokens", "output_tokens", "elapsed_s"}
    steps: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None  # an isolated group that failed: "ExceptionType: message"
    # Why it failed: "exception" (the engine raised while starting or serving the group: evidence
    # about the engine) or "memory" (an allocation refused: evidence about the machine).
    error_kind: str | None = None
    import_s: float = 0.0  # importing the engine (and lm-eval) for this group: the first group pays it
    lm_eval_s: float = 0.0  # the group's lm-eval tasks on the live engine (their import in import_s)
    # Rows from the cache (run/cache.py): every time above is the run's that computed them, not this one's.
    reused: bool = False

    @property
    def tokens_per_s(self) -> float:
        return self.output_tokens / self.elapsed_s if self.elapsed_s > 0 else 0.0


@dataclass
class WorkerTiming:
    """A worker's own clock, written as it ends (TIMING): what no group row holds (docs/design.md,
    "Where the time goes")."""

    started: float = 0.0  # the interpreter's start, seconds since the epoch
    boot_s: float = 0.0  # interpreter start -> the worker's main(): Python's start-up and the worker code's imports
    wall_s: float = 0.0  # interpreter start -> the job's end

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "WorkerTiming | None":
        """The record from timing.json's object; None where a field is missing or not a number."""
        values = [data.get(f.name) for f in fields(cls)]
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            return None
        return cls(*(float(v) for v in values))


def ignore_progress() -> None:
    """A sink's `finished` where nobody watches."""


@dataclass(frozen=True)
class Sink:
    """Where a backend sends a group's output: result rows, lm-eval sample rows, and one call of
    `finished` per finished request (live progress, infercheck/run/progress.py)."""

    emit: Callable[[RequestResult], None]
    emit_samples: Callable[[list[dict[str, Any]]], None]
    finished: Callable[[], None] = ignore_progress


RESULTS = "results.jsonl"
LM_EVAL = "lm_eval.jsonl"
GROUPS = "groups.jsonl"
STATUS = "status.json"
JOB_FILE = "job.json"  # the job a worker folder ran (the cache rewrites it with every group, reused ones too)
# Digests of the job as the harness planned it (host paths), written at launch: what a resumed run
# compares, since job.json holds the worker's view of the job (run/view.py) while the worker runs.
JOB_DIGESTS = "job.digests.json"
ENGINE_PACKAGE = "vllm"  # what an engine job traces: the whole package (its files named "vllm/...")
TRACE = "trace.json"  # {group name: {file: [executed line numbers]}}, for a job with `trace`
SOURCES = "sources.json"  # {file: its text as this variant ran it, or null}, for a job that traces files
TIMING = "timing.json"  # the worker's own clock (WorkerTiming)
PYTEST_GROUP = "pytest"  # the trace context of a traced pytest symptom run (run/traced_pytest.py)
STDOUT = "worker.stdout"
STDERR = "worker.stderr"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL file; a torn last line (worker killed mid-write) is skipped."""
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows
