"""The run's prompt draw (docs/design.md, "Prompt draws"): every prompt a run sends is an instance
drawn from the bundled distributions by a seed recorded in the run folder.

A patch must not be able to recognise the harness by its inputs, so a validate draws a fresh seed
(or takes `--seed`) and every prompt source asks the draw for its instances: the addition examples
a prompt set starts from, the few-shot lines an app builds its prompts from, the token ids of the
prefix-cache oracle's chunks, the order of the lm-eval tasks' data. The distributions stay the
same (lengths, counts, structure come from the suite and app files); only the instances change.
The reference scores what the engines were sent, so it uses the same draw; the group cache keys
on the requests themselves, so a rerun with the same seed reuses everything.

Seed 0 is the identity draw: the instances the bundled files were written against (and the only
draw of runs recorded before draws existed, whose options carry no seed).
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

from infercheck.errors import InfercheckError

IDENTITY = 0  # the draw of the bundled instances
SEED_BITS = 31
T = TypeVar("T")


@dataclass(frozen=True)
class Draw:
    seed: int = IDENTITY

    @classmethod
    def fresh(cls) -> "Draw":
        """A new draw (never the identity: a run that did not ask for it gets instances nobody wrote)."""
        return cls(1 + secrets.randbelow(2 ** SEED_BITS - 1))

    def tag(self, tag: int | str) -> int | str:
        """A random stream's key: the bundled key itself under the identity draw, else keyed by the seed."""
        return tag if self.seed == IDENTITY else f"{self.seed}/{tag}"

    def rng(self, tag: int | str) -> random.Random:
        return random.Random(self.tag(tag))

    def shift(self, size: int, tag: str) -> int:
        """Where a source of `size` items starts (0 under the identity draw)."""
        return 0 if self.seed == IDENTITY or size <= 0 else self.rng(f"shift:{tag}").randrange(size)

    def order(self, items: list[T], tag: str) -> list[T]:
        """The items in this draw's order (unchanged under the identity draw)."""
        if self.seed == IDENTITY:
            return list(items)
        out = list(items)
        self.rng(f"order:{tag}").shuffle(out)
        return out


def parse_seed(text: str) -> int:
    """A `--seed` value: an integer in [0, 2**31)."""
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"--seed must be an integer, not {text!r}") from None
    if not 0 <= value < 2 ** SEED_BITS:
        raise ValueError(f"--seed must be in [0, {2 ** SEED_BITS}), not {value}")
    return value


SEED_VARIABLE = "INFERCHECK_SEED"  # the default seed where no `--seed` is given (a test session's fixed draw)


def chosen_seed(explicit: int | None, environ: Mapping[str, str]) -> int:
    """The seed a new run draws its prompts with: `--seed`, else $INFERCHECK_SEED, else a fresh one."""
    if explicit is not None:
        return explicit
    text = environ.get(SEED_VARIABLE, "").strip()
    if not text:
        return Draw.fresh().seed
    try:
        return parse_seed(text)
    except ValueError as exc:
        raise InfercheckError(f"${SEED_VARIABLE}: {exc}".replace("--seed", "the seed")) from None
