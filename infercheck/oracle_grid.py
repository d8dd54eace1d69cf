"""The sampling oracle's workload: a parameter grid expanded into rows, and rows into batch plans
(docs/design.md, "Oracles"). Pure and deterministic: the same YAML gives the same requests.

A *row* is one set of sampling params: each grid field alone at each of its values, the greedy
rows (temperature 0 with a field that can change a greedy choice), the seeded rows, the `n > 1`
row and random combinations drawn from the grid with a fixed seed. Each row runs under every
`logprobs_mode` (one engine per mode) in six *batch plans*: alone (one row per generate call),
uniform (the row's params on every prompt, one call), field (every value of one parameter, with the
rows without params, one call per parameter: batch-wide code paths chosen by what the batch holds —
top-k without top-p, say — see several values of it at once), mixed (every row, plus rows without
params, in one call), reversed (the mixed batch in reverse order) and staggered (the mixed batch
with lengths cycling 2..max_tokens: rows leave the running batch at every step, the batch condenses
— rows with params move into freed slots: the logits processors' removed and moved updates) and
joining (rows enter the running engine between steps, in cohorts: a plain row that leaves
after two tokens ahead of each row, so the batch condenses and moves every row down into a freed
slot, then, once it has, a plain row arriving for each, appended into the slots the moved rows
vacated — a slot's state must be its occupant's own, never a previous one's; docs/design.md,
"Oracles"). Request ids:
`oracle/<name>#<mode>/<plan>:<row>@p<prompt>`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from infercheck.errors import InfercheckError

MODES = ("raw_logprobs", "raw_logits", "processed_logprobs", "processed_logits")
PLANS = ("alone", "uniform", "field", "mixed", "reversed", "staggered", "joining")
PLAIN = "none"  # rows without sampling params of their own (the engine's defaults)


@dataclass(frozen=True)
class Row:
    name: str  # "top_k.0", "combo.03", "seeded.1", "none.2"
    params: dict[str, Any]  # sampling params of the row (no max_tokens)
    prompt: int  # index of the prompt it runs on (alone, mixed, reversed)
    field: str  # the parameter it exercises ("combo", "seeded", "n", "none" for the others)


@dataclass(frozen=True)
class Slot:
    """One request of the oracle: a row in a plan under a mode, on a prompt, in a wave."""

    mode: str
    plan: str
    row: Row
    prompt: int
    wave: int
    batch: str = ""  # the field plan's parameter: rows without params run in every field's batch
    max_tokens: int = 0  # the staggered and joining plans' own length; 0: the oracle's max_tokens
    join_step: int = 0  # the joining plan: engine steps of the wave before the row enters

    @property
    def key(self) -> str:
        plan = f"{self.plan}.{self.batch}" if self.batch else self.plan
        return f"{plan}:{self.row.name}@p{self.prompt}"


def parse_key(key: str) -> tuple[str, str, int] | None:
    """(plan, row, prompt) of a slot key — the plan with its batch, "field.top_k" — or None."""
    plan, sep, rest = key.partition(":")
    row, at, prompt = rest.rpartition("@p")
    return (plan, row, int(prompt)) if sep and at and prompt.isdigit() else None


def resolve(value: Any, vocab: int | None) -> Any:
    """`vocab` and `vocab-N` stand for the model's vocabulary size (minus N)."""
    if isinstance(value, str) and value.startswith("vocab"):
        if vocab is None:
            raise InfercheckError(f"the oracle needs the model's vocabulary size for {value!r}")
        return vocab + int(value[len("vocab"):] or 0)  # "vocab-1": the size plus -1
    return value


def params_for(field: str, value: Any, vocab: int | None) -> dict[str, Any]:
    """A grid value as sampling params: a mapping with the field's own key merges as is
    (`{min_tokens: 4, stop_token_ids: [19]}`), anything else is `{field: value}`."""
    if isinstance(value, dict) and field in value:
        return {k: resolve(v, vocab) for k, v in value.items()}
    return {field: resolve(value, vocab)}


def check_ids(params: dict[str, Any], vocab: int | None, where: str) -> None:
    ids = [int(t) for t in params.get("logit_bias") or {}] + [int(t) for t in params.get("allowed_token_ids") or []]
    ids += [int(t) for t in params.get("stop_token_ids") or []]
    if vocab is not None and any(not 0 <= t < vocab for t in ids):
        raise InfercheckError(f"oracle row {where}: token ids {ids} outside the model's vocabulary of {vocab}")


def grid_rows(w: dict[str, Any], vocab: int | None) -> list[dict[str, Any]]:
    """(field, params) of every row, in a fixed order, before prompts are assigned."""
    base = dict(w.get("random_base") or {"temperature": 1.0})
    grid: dict[str, list[Any]] = dict(w.get("grid") or {})
    rows: list[dict[str, Any]] = []
    for field, values in grid.items():
        for value in values:
            own = params_for(field, value, vocab)
            rows.append({"field": field, "params": own if "temperature" in own else {**base, **own}})
    for field in w.get("greedy") or []:
        for value in grid[field][:1]:
            rows.append({"field": f"greedy+{field}", "params": {"temperature": 0.0, **params_for(field, value, vocab)}})
    for extra in w.get("seeded") or []:
        rows.append({"field": "seeded", "params": {**base, **{k: resolve(v, vocab) for k, v in extra.items()}}})
    if w.get("n"):
        rows.append({"field": "n", "params": {**base, **dict(w["n"])}})
    rows += combos(grid, dict(w.get("combos") or {}), base, vocab)
    return rows


def combos(grid: dict[str, list[Any]], spec: dict[str, Any], base: dict[str, Any], vocab: int | None
           ) -> list[dict[str, Any]]:
    """`count` combinations of 2..`max_fields` grid fields at random values (seeded); every third
    carries a seed of its own, so seeded rows sit beside processors in the mixed batch."""
    rng = random.Random(int(spec.get("seed", 0)))
    fields = sorted(grid)
    out = []
    for i in range(int(spec.get("count", 0))):
        params = dict(base)
        for field in rng.sample(fields, rng.randint(2, min(len(fields), int(spec.get("max_fields", 4))))):
            params.update(params_for(field, rng.choice(grid[field]), vocab))
        if i % 3 == 2:
            params["seed"] = 7000 + i
        out.append({"field": "combo", "params": params})
    return out


def oracle_rows(w: dict[str, Any], vocab: int | None, prompts: int) -> list[Row]:
    """Every row with its prompt (spread round-robin), plus `plain_rows` rows without params."""
    rows, counters = [], {}
    specs = grid_rows(w, vocab) + [{"field": PLAIN, "params": {}} for _ in range(int(w.get("plain_rows", 3)))]
    for i, spec in enumerate(specs):
        field = spec["field"].split("+")[-1]
        head = spec["field"].replace("+", ".")
        n = counters.get(head, 0)
        counters[head] = n + 1
        name = f"{head}.{n}"
        check_ids(spec["params"], vocab, name)
        rows.append(Row(name, spec["params"], i % prompts, field))
    return rows


def staggered_length(i: int, params: dict[str, Any], max_tokens: int) -> int:
    """Lengths 2..max_tokens in turn (never below the row's min_tokens, which vLLM refuses)."""
    return max(2 + i % max(1, max_tokens - 1), int(params.get("min_tokens") or 0))


JOIN_COHORT = 16  # rows per cohort of the joining plan: its prefills stay far below one step's token budget
LEAVER_TOKENS = 2  # a leaver's length: it leaves after the second step, the batch condenses at the third
ARRIVAL_STEP = 3  # steps of a cohort before its arrivals join: after the condense


def joining(rows: list[Row], prompts: int, max_tokens: int) -> list[tuple[Row, int, int]]:
    """The joining plan as (row, length, join step), in submission order. Per cohort of rows: a
    plain leaver ahead of each row (lower slots), the rows (their full length), and a plain arrival
    for each, joining after the leavers left and the rows moved into their slots; the next cohort
    starts once this one is done (an idle engine skips ahead)."""
    out: list[tuple[Row, int, int]] = []
    span = ARRIVAL_STEP + max_tokens + 1
    for c, start in enumerate(range(0, len(rows), JOIN_COHORT)):
        cohort, at = rows[start:start + JOIN_COHORT], c * span
        plain = lambda kind, i: Row(f"{PLAIN}.{kind}{start + i}", {}, (start + i) % prompts, PLAIN)  # noqa: E731
        out += [(plain("l", i), LEAVER_TOKENS, at) for i in range(len(cohort))]
        out += [(r, max(max_tokens, ARRIVAL_STEP + 2, int(r.params.get("min_tokens") or 0)), at) for r in cohort]
        out += [(plain("a", i), max_tokens, at + ARRIVAL_STEP) for i in range(len(cohort))]
    return out


def slots(rows: list[Row], prompts: int, modes: tuple[str, ...], plans: tuple[str, ...],
          grid_fields: tuple[str, ...] = (), max_tokens: int = 6) -> list[Slot]:
    """Every request of the oracle in submission order (waves ascending within a mode); the field
    plan batches the rows of each of `grid_fields` (greedy rows of the field included)."""
    out = []
    with_params = [r for r in rows if r.field != PLAIN]
    for mode in modes:
        wave = 0
        for plan in plans:
            if plan == "alone":
                for r in with_params:
                    out.append(Slot(mode, plan, r, r.prompt, wave))
                    wave += 1
            elif plan == "uniform":
                for r in with_params:
                    out += [Slot(mode, plan, r, p, wave) for p in range(prompts)]
                    wave += 1
            elif plan == "field":
                plain = [r for r in rows if r.field == PLAIN]
                for field in dict.fromkeys(r.field for r in with_params if r.field in grid_fields):
                    out += [Slot(mode, plan, r, r.prompt, wave, field) for r in rows if r.field == field]
                    out += [Slot(mode, plan, r, r.prompt, wave, field) for r in plain]
                    wave += 1
            elif plan in ("mixed", "reversed"):
                ordered = rows if plan == "mixed" else list(reversed(rows))
                out += [Slot(mode, plan, r, r.prompt, wave) for r in ordered]
                wave += 1
            elif plan == "staggered":
                out += [Slot(mode, plan, r, r.prompt, wave, max_tokens=staggered_length(i, r.params, max_tokens))
                        for i, r in enumerate(rows)]
                wave += 1
            elif plan == "joining":
                out += [Slot(mode, plan, r, r.prompt, wave, max_tokens=length, join_step=step)
                        for r, length, step in joining(rows, prompts, max_tokens)]
                wave += 1
            else:
                raise InfercheckError(f"unknown batch plan {plan!r} (known: {', '.join(PLANS)})")
    return out
