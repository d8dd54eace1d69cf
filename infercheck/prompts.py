"""Prompt sets named in suite and symptom YAML: deterministic prompts with expected answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infercheck.draw import Draw
from infercheck.errors import InfercheckError
from infercheck.models import addition
from infercheck.models.general_text import general_passages
from infercheck.paths import DATA_DIR

ADDITION = DATA_DIR / "addition"


@dataclass(frozen=True)
class Prompt:
    id: str
    text: str
    answer: str | None = None  # expected completion before the first newline, when known


def _addition(spec: dict[str, Any], draw: Draw, many_shot: bool) -> list[Prompt]:
    """Held-out questions from the spec's offset on (shifted by the draw: every set of a run by the
    same amount, so sets the files keep apart stay apart), ids relative to the spec's offset."""
    test = addition.load_split(ADDITION / "test.jsonl")
    fewshot = addition.load_split(ADDITION / "fewshot.jsonl")
    count, offset = int(spec.get("count", 8)), int(spec.get("offset", 0))
    lo, hi = int(spec.get("min_chars", 400)), int(spec.get("max_chars", spec.get("min_chars", 400)))
    question_shift, shot_shift = draw.shift(len(test), "addition-test"), draw.shift(len(fewshot), "addition-fewshot")
    prompts = []
    for i in range(count):
        ex = test[(question_shift + offset + i) % len(test)]
        if many_shot:
            target = lo + (hi - lo) * i // max(1, count - 1)
            shots = addition.shots_for_length(fewshot, target - len(ex.question), offset=shot_shift + offset + 7 * i)
            text = addition.many_shot_prompt(shots, ex)
        else:
            text = ex.question
        prompts.append(Prompt(f"{'m' if many_shot else 'z'}{offset + i}", text, ex.answer))
    return prompts


def _general_text(spec: dict[str, Any], draw: Draw) -> list[Prompt]:
    """Prompts of plain text for any tokenizer: prompt i is made of consecutive passages from the
    draw's start (plus the spec's offset and i), joined by blank lines and cut at a space to a length
    spread evenly from min_chars to max_chars (as the addition sets spread theirs)."""
    passages = general_passages()
    count, offset = int(spec.get("count", 8)), int(spec.get("offset", 0))
    lo, hi = int(spec.get("min_chars", 400)), int(spec.get("max_chars", spec.get("min_chars", 400)))
    shift = draw.shift(len(passages), "general-text")
    prompts = []
    for i in range(count):
        target = lo + (hi - lo) * i // max(1, count - 1)
        text, j = "", 0
        while len(text) < target and j < len(passages):
            text += ("\n\n" if text else "") + passages[(shift + offset + 5 * i + j) % len(passages)]
            j += 1
        cut = text.rfind(" ", 0, target + 1)
        prompts.append(Prompt(f"g{offset + i}", text[:cut if cut > target // 2 else target]))
    return prompts


def _literal(spec: dict[str, Any], draw: Draw) -> list[Prompt]:
    """The spec's own prompts (a bug report's words): the same under every draw."""
    items = spec.get("prompts") or []
    out = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            out.append(Prompt(f"l{i}", item))
        else:
            out.append(Prompt(str(item.get("id", f"l{i}")), item["text"], item.get("answer")))
    return out


PROMPT_SETS = {
    "addition-zero-shot": lambda spec, draw: _addition(spec, draw, many_shot=False),
    "addition-many-shot": lambda spec, draw: _addition(spec, draw, many_shot=True),
    "general-text": _general_text,
    "literal": _literal,
}
# What each set's text needs of a tokenizer: the bundled models' character vocabulary carries the
# addition sets (and lower-case words); the general-text corpus needs a general tokenizer.
GENERAL_SETS = frozenset({"general-text"})
# Sets whose answers are the bundled models' task (accuracy on them means something for those only).
ADDITION_SETS = frozenset({"addition-zero-shot", "addition-many-shot"})


def needs_general_tokenizer(spec: dict[str, Any]) -> bool:
    return spec.get("set") in GENERAL_SETS


def source_texts() -> list[str]:
    """What every draw's prompts are made of: the bundled questions and few-shot lines. A literal
    taken from one of them is a prompt instance of some run, whichever this run's draw is. The
    general-text passages are left out: their prose and code share words with engine source
    ("float32"), so a literal found in them is no sign; the passages a run sent count as its own."""
    return [ex.text for split in ("test.jsonl", "fewshot.jsonl") for ex in addition.load_split(ADDITION / split)]


def build_prompts(spec: dict[str, Any], draw: Draw = Draw()) -> list[Prompt]:
    """Expand a prompt-set spec, e.g. {set: addition-many-shot, count: 12, min_chars: 400}, under
    the run's draw (draw.py; the default is the identity draw)."""
    name = spec.get("set", "literal")
    if name not in PROMPT_SETS:
        raise InfercheckError(f"unknown prompt set {name!r} (known: {', '.join(PROMPT_SETS)})")
    prompts = PROMPT_SETS[name](spec, draw)
    if not prompts:
        raise InfercheckError(f"prompt set {name!r} is empty")
    return prompts
