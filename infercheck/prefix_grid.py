"""The prefix-cache oracle's request sequences (docs/design.md, "Oracles"): prompts built from
block-sized chunks of token ids, so that every case of the cache's specification is one request.

The cases, at each block size B, submitted one at a time in this order: a first prompt; the same
again; shared prefixes of 1 to 4 blocks; a prompt that is a whole number of blocks (the last block
is recomputed: at least one prompt token must run); an equal later block after a different prefix,
at depths 1 to 3, after a gap, first in the prompt, and after another prefix whose own blocks are
cached (a block is its whole prefix, not its tokens or its position); the same prompt under a new `cache_salt`, again under that salt, under another;
partial last blocks; a prompt shorter than a block. Under a small cache (`num_gpu_blocks_override`)
a sequence that evicts: prompts that fill the cache, then the first again. What each request should
find cached is not written here: the ideal cache (checks/prefix_cache.py) replays the sequence.

vLLM keeps one KV-cache manager per attention type, each with its own cache-hit search: full
attention takes the longest run of cached blocks from the start; a sliding window searches from
the right for `cdiv(window - 1, B)` contiguous cached blocks (the ones the window still reads),
pads the blocks before them with null blocks, and takes the leading run when no such stretch
exists. The same sequences therefore also run on config-only variants of the bundled
sliding-window model (`sliding_windows`, each at every block size): a window within one block, a
window over several blocks, a window longer than every prompt. There the ideal cache is an upper
bound, not the exact count: a sliding-window hit needs KV that an earlier request of the same
prefix computed, so more than the ideal is false sharing as on full attention; but vLLM 0.32.0
keeps only the blocks a later request can resume from (sparse retention, `reachable_block_mask`)
and frees out-of-window blocks while a request runs, so fewer is expected there (reported as below
the bound, never as lost reuse). Eviction runs on a full-attention model only
(the pool a sliding window frees and retains differently is not the one the ideal cache replays);
on a sliding-window run model the run's own sets are upper bounds too.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from infercheck.draw import Draw
from infercheck.errors import InfercheckError
from infercheck.models import zoo
from infercheck.models.config_variants import ConfigVariant, variant_folder

TOKEN_POOL = range(4, 20)  # ordinary ids of the bundled char-level models ('0'-'9', '+', '=', ...)


@dataclass(frozen=True)
class CacheRequest:
    key: str  # "r00-first", unique within a sequence; the order of the sequence is the order of submission
    prompt_ids: tuple[int, ...]
    salt: str | None = None


class Chunks:
    """Deterministic block-sized chunks of token ids: chunk(name) is the same for the same name and seed."""

    def __init__(self, block_size: int, seed: int | str) -> None:
        self.block_size, self.seed = block_size, seed

    def chunk(self, name: str, length: int | None = None) -> tuple[int, ...]:
        rng = random.Random(f"{self.seed}:{self.block_size}:{name}")
        ids = tuple(rng.choice(TOKEN_POOL) for _ in range(self.block_size))
        return ids[:length] if length is not None else ids

    def of(self, *names: str, tail: int = 0) -> tuple[int, ...]:
        """The chunks named, in order, then `tail` tokens of a chunk of their own (a partial block)."""
        out = tuple(t for n in names for t in self.chunk(n))
        return out + (self.chunk("tail:" + "-".join(names), tail) if tail else ())


def sequence(block_size: int, seed: int | str = 0) -> list[CacheRequest]:
    """The oracle's requests at one block size with room for every block (no eviction)."""
    c = Chunks(block_size, seed)
    half = block_size // 2
    a4 = ("a0", "a1", "a2", "a3")
    cases = [
        ("first", c.of(*a4, tail=5), None),
        ("identical", c.of(*a4, tail=5), None),
        *[(f"shared-{n}", c.of(*a4[:n], f"s{n}", tail=3), None) for n in range(1, 4)],
        ("shared-4", c.of(*a4, "s4", tail=3), None),
        ("whole-blocks", c.of(*a4), None),
        *[(f"later-equal-depth-{d}", c.of(*[f"x{d}.{i}" for i in range(d)], *a4[d:], tail=5), None) for d in (1, 2, 3)],
        ("gap-in-prefix", c.of("a0", "y1", "a2", "a3", tail=5), None),
        ("later-block-first", c.of("a1", "a2", tail=5), None),
        ("other-prefix", c.of("a0", "z1", tail=3), None),
        ("equal-later-after-other-prefix", c.of("a0", "z1", "a2", "a3", tail=5), None),
        ("salted", c.of(*a4, tail=5), "salt-1"),
        ("salted-again", c.of(*a4, tail=5), "salt-1"),
        ("salted-prefix", c.of(*a4[:2], tail=4), "salt-1"),
        ("other-salt", c.of(*a4, tail=5), "salt-2"),
        ("partial-block", c.of(*a4[:2], tail=half), None),
        ("partial-of-cached-block", c.of(*a4[:2]) + c.chunk("a2", half), None),
        ("shorter-than-a-block", c.chunk("a0", block_size - 1), None),
    ]
    return [CacheRequest(f"r{i:02d}-{name}", ids, salt) for i, (name, ids, salt) in enumerate(cases)]


def eviction_sequence(block_size: int, seed: int | str = 1) -> list[CacheRequest]:
    """Prompts of 4-5 blocks each, distinct, then the first ones again: on a cache of a few
    requests' blocks, later prompts evict earlier ones' blocks (least recently used first, a
    request's tail blocks before its head) and the repeats find what is left."""
    c = Chunks(block_size, seed)
    cases = [
        ("fill-a", c.of("a0", "a1", "a2", "a3", tail=3)),
        ("fill-b", c.of("b0", "b1", "b2", "b3", tail=3)),
        ("again-a", c.of("a0", "a1", "a2", "a3", tail=3)),
        ("fill-c", c.of("c0", "c1", "c2", "c3", "c4", tail=3)),
        ("again-b", c.of("b0", "b1", "b2", "b3", tail=3)),
        ("again-a-prefix", c.of("a0", "a1", tail=3)),
        ("again-c", c.of("c0", "c1", "c2", "c3", "c4", tail=3)),
    ]
    return [CacheRequest(f"e{i:02d}-{name}", ids) for i, (name, ids) in enumerate(cases)]


UNCACHED = "uncached"  # the set every cached request is paired with: the same prompt, no prefix caching


@dataclass(frozen=True)
class CacheSet:
    """One cached engine of the oracle: its set name, block size, pool (None: never full) and model."""

    name: str
    block_size: int
    num_blocks: int | None = None
    model: str | None = None  # a bundled model it runs on; None: the run's model
    window: int | None = None  # that model with its sliding window set to this (a config-only variant)
    draw: Draw = Draw()  # the run's draw: which token ids the chunks are

    @property
    def twin_prefix(self) -> str:
        """Its requests' keys in its uncached set: f"{twin_prefix}{key}"."""
        return f"{self.name}-"

    @property
    def twin_set(self) -> str:
        """The uncached set its requests are paired with (one per model: the same model, no caching)."""
        if self.model is None:
            return UNCACHED
        return f"{UNCACHED}-w{self.window}" if self.window is not None else f"{UNCACHED}-{self.model}"

    def folder(self) -> str | None:
        """The model folder it runs on (a window variant is built into the cache); None: the run's."""
        if self.model is None:
            return None
        if self.window is None:
            return str(zoo.model_dir(self.model))
        variant = ConfigVariant(f"window-{self.window}", self.model, {"sliding_window": self.window})
        return str(variant_folder(variant, zoo.model_dir(variant.model)))

    def engine_args(self) -> dict[str, Any]:
        args: dict[str, Any] = {"enable_prefix_caching": True, "block_size": self.block_size}
        if self.num_blocks is not None:
            # the engine refuses to start when max_model_len does not fit its KV cache
            args.update(num_gpu_blocks_override=self.num_blocks, max_model_len=(self.num_blocks - 2) * self.block_size)
        return args

    def requests(self) -> list[CacheRequest]:
        if self.num_blocks is None:
            return sequence(self.block_size, self.draw.tag(0))
        return eviction_sequence(self.block_size, self.draw.tag(1))


def bundled(name: Any, what: str) -> str:
    if name not in zoo.SPECS:
        raise InfercheckError(f"prefix-cache oracle: {what} must be a bundled model, one of {', '.join(zoo.SPECS)}")
    return str(name)


def cache_sets(workload: dict[str, Any], draw: Draw = Draw()) -> list[CacheSet]:
    """The oracle's cached engines: one per block size on the run's model, the small cache
    (`eviction`, on the full-attention model it names: the ideal replays full attention's pool), and
    one per block size on each `sliding_windows` variant of `window_model`."""
    blocks = [int(b) for b in workload.get("block_sizes") or (32, 64)]
    out = [CacheSet(f"b{b}", b, draw=draw) for b in blocks]
    if ev := workload.get("eviction"):
        out.append(CacheSet(f"evict-b{int(ev['block_size'])}", int(ev["block_size"]), int(ev["num_blocks"]),
                            bundled(ev.get("model"), "eviction's `model`"), draw=draw))
    if windows := [int(w) for w in workload.get("sliding_windows") or ()]:
        model = bundled(workload.get("window_model"), "`window_model`")
        out += [CacheSet(f"w{w}-b{b}", b, model=model, window=w, draw=draw) for w in windows for b in blocks]
    return out
