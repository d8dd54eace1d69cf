"""The prefix-cache oracle's grading: an ideal prefix cache replayed over the requests an engine
served, against what the engine says it served from its cache (docs/design.md, "Oracles").

The ideal cache is vLLM's specification of automatic prefix caching, in plain Python: a full block
of B tokens is cached under its whole prefix (every token up to its end) and the request's
`cache_salt`; a request is served the longest run of cached blocks from its start, at most
(prompt length - 1) // B blocks (one prompt token always runs, to give the next token's logits);
the blocks a request computes (its prompt and every output token but the last) are cached as they
fill. Blocks live in a pool of `num_blocks` (one reserved): a new block comes from the head of the
free queue, evicting what it held; a finished request's cached blocks go back to the tail, its last
block first (least recently used first, a request's tail before its head), and its partial blocks
(never matched) to the head, to be reused first; a block found in the cache leaves the queue while
in use. Without `num_blocks` nothing is evicted.

More cached tokens than the ideal is false sharing (outputs built on another prompt's KV: a
failure); fewer is lost reuse (the cache bypassed or blocks dropped: workaround evidence). On the
sliding-window sets the ideal is an upper bound (prefix_grid.py): vLLM keeps only some of their
blocks, so fewer is expected there and is reported as below the bound, never as lost reuse (a buggy
base that shares falsely can meet the bound where a correct engine does not).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from infercheck.checks.app_compare import MAX_EXAMPLES, by_set, divergence
from infercheck.payloads import Comparison
from infercheck.prefix_grid import CacheSet
from infercheck.run.job import RequestResult

BlockKey = tuple[Any, ...]  # (salt, every token up to the block's end)


@dataclass(frozen=True)
class Served:
    """One request as the engine served it, in submission order."""

    key: str
    prompt_ids: list[int]
    output_ids: list[int]
    salt: str | None = None


@dataclass
class IdealCache:
    block_size: int
    num_blocks: int | None = None  # the engine's pool, one block reserved; None: never full
    free: OrderedDict[int, None] = field(default_factory=OrderedDict)  # free queue, head first
    held: dict[int, BlockKey] = field(default_factory=dict)  # block -> what it caches
    where: dict[BlockKey, list[int]] = field(default_factory=dict)  # cached prefix -> blocks holding it
    next_block: int = 1

    def __post_init__(self) -> None:
        if self.num_blocks is not None:
            self.free = OrderedDict((b, None) for b in range(1, self.num_blocks))

    def keys(self, tokens: list[int], salt: str | None) -> list[BlockKey]:
        b = self.block_size
        return [(salt, tuple(tokens[:end])) for end in range(b, len(tokens) + 1, b)]

    def take(self) -> int:
        if self.num_blocks is None:
            self.next_block += 1
            return self.next_block - 1
        if not self.free:
            raise ValueError("the ideal cache ran out of blocks: the request does not fit the pool")
        block, _ = self.free.popitem(last=False)
        if block in self.held:  # evicted: its prefix is no longer cached here
            old = self.held.pop(block)
            self.where[old].remove(block)
            if not self.where[old]:
                del self.where[old]
        return block

    def serve(self, request: Served) -> int:
        """Replay one request; returns the tokens the ideal cache serves it."""
        prompt_keys = self.keys(request.prompt_ids, request.salt)
        cap = (len(request.prompt_ids) - 1) // self.block_size
        hits: list[int] = []
        for key in prompt_keys[:cap]:
            if key not in self.where:
                break
            hits.append(self.where[key][0])
        for block in hits:
            self.free.pop(block, None)
        computed = list(request.prompt_ids) + list(request.output_ids[:-1])
        blocks = hits + [self.take() for _ in range(-(-len(computed) // self.block_size) - len(hits))]
        for block, key in zip(blocks[len(hits):], self.keys(computed, request.salt)[len(hits):]):
            self.held[block] = key
            self.where.setdefault(key, []).append(block)
        ordered = list(reversed(blocks))  # a request's tail is evicted before its head
        for block in reversed([b for b in ordered if b not in self.held]):  # partial blocks: reused first
            self.free[block] = None
            self.free.move_to_end(block, last=False)
        for block in (b for b in ordered if b in self.held):  # cached blocks: least recently used first
            self.free[block] = None
        return len(hits) * self.block_size


def ideal_cached_tokens(requests: list[Served], block_size: int, num_blocks: int | None = None) -> list[int]:
    """Each request's cached tokens under the ideal cache, requests served one after another."""
    cache = IdealCache(block_size, num_blocks)
    return [cache.serve(r) for r in requests]


def compare_prefix_cache(results: list[RequestResult], cache_sets: list[CacheSet], near_tie: float) -> Comparison:
    """Every cached request gets the ideal cache's cached tokens (no more: false sharing; fewer:
    lost reuse, reported but not failing) and the outputs of its uncached twin (`CacheSet.twin_set`)."""
    sets = by_set(results)
    rows, false_sharing, lost, below_bound, diverged, missing = [], [], {}, {}, [], []
    for cs in cache_sets:
        twins = sets.get(cs.twin_set, {})
        served = sorted(sets.get(cs.name, {}).items(), key=lambda kv: (kv[1].wave, kv[0]))
        if any(r.num_cached_tokens is None for _, r in served):
            return Comparison("prefix-cache", False, None, f"{cs.name}: the engine reports no num_cached_tokens")
        ideal = ideal_cached_tokens([Served(k, r.prompt_ids, r.output_ids, r.cache_salt)
                                     for k, r in served], cs.block_size, cs.num_blocks)
        for (key, result), expected in zip(served, ideal):
            cell = f"{cs.name}/{key}"
            measured = int(result.num_cached_tokens or 0)
            rows.append({"request": cell, "prompt_tokens": len(result.prompt_ids), "ideal": expected,
                         "measured": measured})
            if measured > expected:
                false_sharing.append(f"{cell}: {measured} cached tokens, ideal {expected} (first wrong block: "
                                     f"{expected // cs.block_size}, block size {cs.block_size})")
            elif measured < expected and cs.window is None:
                lost[cell] = expected - measured
            elif measured < expected:  # an upper bound only: fewer is how the window's manager keeps blocks
                below_bound[cell] = expected - measured
            twin = twins.get(f"{cs.twin_prefix}{key}")
            if twin is None:
                missing.append(cell)
            elif (d := divergence(twin, result, near_tie)) is not None:
                diverged.append({"request": cell, **d})
    failing = sorted({r["request"] for r in rows if r["measured"] > r["ideal"]} | {d["request"] for d in diverged}
                     | set(missing))
    bound_only = [cs.name for cs in cache_sets if cs.window is not None]
    summary = (f"{len(rows)} requests: {len(false_sharing)} served more cached tokens than the ideal cache "
               f"(false sharing), {len(lost)} fewer (lost reuse, {sum(lost.values())} tokens), "
               f"{len(diverged)} differ from the uncached engine" + (f", {len(missing)} unpaired" if missing else "")
               + (f"; on the sliding-window sets, where the ideal is an upper bound, {len(below_bound)} below it"
                  if bound_only else ""))
    detail = {"requests": len(rows), "upper_bound_sets": bound_only, "false_sharing": false_sharing[:MAX_EXAMPLES],
              "lost_reuse": lost, "lost_reuse_tokens": sum(lost.values()), "below_bound": below_bound,
              "diverged": len(diverged),
              "failing_cells": failing, "cached_tokens": rows}
    return Comparison("prefix-cache", bool(rows) and not failing, float(len(failing)), summary, detail,
                      diverged[:MAX_EXAMPLES])


def lost_reuse_sign(base: Comparison | None, patched: Comparison | None) -> str | None:
    """Workaround evidence: requests the patched cache serves fewer tokens than the ideal where the
    base cache served them all."""
    if patched is None or not patched.detail.get("lost_reuse"):
        return None
    before = set((base.detail.get("lost_reuse") or {}) if base is not None else {})
    new = {k: v for k, v in patched.detail["lost_reuse"].items() if k not in before}
    if not new:
        return None
    examples = ", ".join(sorted(new)[:MAX_EXAMPLES])
    return (f"prefix cache reused less than the ideal cache on {len(new)} request(s) where base matched it "
            f"({sum(new.values())} tokens lost; e.g. {examples})")
