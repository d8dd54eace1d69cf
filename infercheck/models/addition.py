"""Two-digit addition data: the task the bundled models are trained and measured on.

Every (a, b) pair with 0 <= a, b <= 99 is one example "aa+bb=" -> "sss" (fixed width, zero padded:
"07+45=052"), so every digit sits at a fixed distance from "=". A fixed seed splits the 10,000 pairs
into test / few-shot / train, so no held-out pair is ever trained on.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

SEPARATOR = "\n"
SPLIT_SEED = 1234
TEST_SIZE = 500
FEWSHOT_SIZE = 100


@dataclass(frozen=True)
class Example:
    a: int
    b: int

    @property
    def question(self) -> str:
        return f"{self.a:02d}+{self.b:02d}="

    @property
    def answer(self) -> str:
        return f"{self.a + self.b:03d}"

    @property
    def text(self) -> str:
        return self.question + self.answer + SEPARATOR


def split_examples() -> dict[str, list[Example]]:
    """The fixed test / fewshot / train split of all 10,000 pairs."""
    pairs = [Example(a, b) for a in range(100) for b in range(100)]
    random.Random(SPLIT_SEED).shuffle(pairs)
    return {
        "test": pairs[:TEST_SIZE],
        "fewshot": pairs[TEST_SIZE:TEST_SIZE + FEWSHOT_SIZE],
        "train": pairs[TEST_SIZE + FEWSHOT_SIZE:],
    }


def write_splits(out_dir: Path) -> dict[str, Path]:
    """Write train.jsonl, fewshot.jsonl and test.jsonl (one example per line)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, examples in split_examples().items():
        path = out_dir / f"{name}.jsonl"
        with path.open("w") as fh:
            for ex in examples:
                row = {**asdict(ex), "question": ex.question, "answer": ex.answer}
                fh.write(json.dumps(row) + "\n")
        written[name] = path
    mc_path = out_dir / "mc_test.jsonl"
    mc_path.write_text("".join(json.dumps(r) + "\n" for r in mc_rows(split_examples()["test"])))
    written["mc_test"] = mc_path
    return written


MC_SIZE = 200


def mc_rows(test: list[Example]) -> list[dict]:
    """Multiple-choice items over the first MC_SIZE test pairs: the sum and three near misses."""
    rows = []
    for i, ex in enumerate(test[:MC_SIZE]):
        total = ex.a + ex.b
        wrong = [w for w in (total + 1, total - 1, total + 10, total - 10, total + 11) if 0 <= w <= 198][:3]
        choices = [f"{total:03d}"] + [f"{w:03d}" for w in wrong]
        shift = i % 4  # the right answer at every position equally often
        choices = choices[shift:] + choices[:shift]
        rows.append({"question": ex.question, "choices": choices, "label": choices.index(f"{total:03d}")})
    return rows


def load_split(path: Path) -> list[Example]:
    with path.open() as fh:
        return [Example(int(r["a"]), int(r["b"])) for r in map(json.loads, fh) if r]


def many_shot_prompt(shots: list[Example], query: Example) -> str:
    """Few-shot prompt: solved examples, one per line, then the unsolved query."""
    return "".join(s.text for s in shots) + query.question


def shots_for_length(fewshot: list[Example], min_chars: int, offset: int = 0) -> list[Example]:
    """Enough few-shot examples (cycling from offset) for a prompt of at least min_chars."""
    shots: list[Example] = []
    length = 0
    i = offset
    while length < min_chars:
        ex = fewshot[i % len(fewshot)]
        shots.append(ex)
        length += len(ex.text)
        i += 1
    return shots


def packed_sequence(rng: random.Random, train: list[Example], length: int) -> str:
    """A training sequence: random training examples back to back, cut to `length` chars."""
    parts: list[str] = []
    total = 0
    while total < length:
        ex = train[rng.randrange(len(train))]
        parts.append(ex.text)
        total += len(ex.text)
    return "".join(parts)[:length]
