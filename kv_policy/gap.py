"""What the offline schedule (MIN) keeps that an online policy drops: every decode-critical read of a trace is
classified by what an engine knows at that moment, and the misses of the online policy, of MIN and of a reference
row are counted per class, so the excess misses (online minus MIN) are located.

Classes, each an engine could compute online (none reads the future):
* role: a sink/window block (its request reads it every decode) or a heavy-hitter candidate;
* block: a shared prefix block (a hash of the serving trace), the request's own prompt, or a generated block;
* heavy-hitter reads observed: how often decodes read it as a heavy hitter before this read (0 = its first);
* steps since its last read (any read: prefill or decode);
* prefix recurrence: how many admissions have named the shared block so far (the hash's recurrence count);
* prefix depth: its position in the first prefill that read it, in 512-token hash units (the Mooncake hash's depth:
  a hash names a whole prefix, so its depth is fixed);
* priority band of the block (shared prefix blocks are neutral: priority 50, the mid band).
The per-read misses come from the simulator's operation log (`simulate(..., record=True)`): its decode-critical
hit/miss records are in trace order, one per decode-critical read.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kv_policy import codes
from kv_policy.serving_traces import HASH_BLOCK_TOKENS
from kv_policy.simulator import DC_ACCESS, OP_MISS, OP_RECOMPUTE, simulate
from kv_policy.tiers import TierModel
from kv_policy.trace import Trace

FEATURES: dict[str, tuple[str, ...]] = {
    "role": ("sink/window", "heavy-hitter"),
    "block": ("prefix", "prompt", "generated"),
    "hh_reads_before": ("0", "1", "2-4", "5+"),
    "steps_since_read": ("1", "2-10", "11-100", "101-1000", ">1000"),
    "prefix_recurrence": ("1", "2-3", "4+", "-"),
    "prefix_depth": ("0", "1-3", "4-15", "16+", "-"),
    "band": ("high", "mid", "low"),
}
HEADLINE = ("prefix", "heavy-hitter", "0")  # block, role, hh_reads_before: first heavy-hitter reads of prefix blocks


def _bucket(x: int, edges: tuple[int, ...]) -> int:
    """Index of the first edge >= x (len(edges) when above all)."""
    for j, e in enumerate(edges):
        if x <= e:
            return j
    return len(edges)


def classify(trace: Trace, block_tokens: int) -> np.ndarray:
    """Per decode-critical read (trace order), its class index under each of FEATURES (columns in that order)."""
    kinds, blocks = trace.kind.tolist(), trace.block.tolist()
    steps, crits, cls = trace.step.tolist(), trace.critical.tolist(), trace.cls.tolist()
    req, prio = trace.block_request.tolist(), trace.block_priority.tolist()
    nb = trace.n_blocks
    layout, generated = bytearray(nb), bytearray(nb)
    last, hh, named, depth = [0] * nb, [0] * nb, [0] * nb, [-1] * nb
    per_hash = max(1, HASH_BLOCK_TOKENS // block_tokens)
    out: list[tuple[int, ...]] = []
    burst = 0  # position within the current prefill read (consecutive non-critical reads)
    prev_prefill = False
    for k, b, s, c, h in zip(kinds, blocks, steps, crits, cls):
        prefill = k == codes.ACCESS and not c
        burst = burst + 1 if prefill and prev_prefill else 0
        prev_prefill = prefill
        if k == codes.ALLOC:
            layout[b] = generated[b] = 1 if h == codes.DECODE_CRITICAL else 0
            last[b] = s
        elif k == codes.HINT:
            if c:
                layout[b] = 1
            elif h == codes.WARM and layout[b]:
                layout[b] = 0
        elif prefill:
            last[b] = s
            if req[b] < 0:
                named[b] += 1
                if depth[b] < 0:
                    depth[b] = burst // per_hash
        elif k == codes.ACCESS:
            shared = req[b] < 0
            band = 0 if prio[b] >= 70 else 1 if prio[b] >= 40 else 2
            out.append((0 if layout[b] else 1, 0 if shared else 2 if generated[b] else 1,
                        _bucket(hh[b], (0, 1, 4)), _bucket(s - last[b], (1, 10, 100, 1000)),
                        _bucket(named[b], (1, 3)) if shared else 3,
                        _bucket(depth[b], (0, 3, 15)) if shared and depth[b] >= 0 else 4, band))
            if not layout[b]:
                hh[b] += 1
            last[b] = s
    return np.asarray(out, dtype=np.int8).reshape(-1, len(FEATURES))


def dc_miss_mask(trace: Trace, policy, tiers: TierModel) -> np.ndarray:
    """Per decode-critical read (trace order): did `policy` miss it?"""
    ops = simulate(trace, policy, tiers, record=True).ops
    dc = ops["charge"] == DC_ACCESS
    return np.isin(ops["op"][dc], (OP_MISS, OP_RECOMPUTE))


@dataclass
class SeedCounts:
    """One seed's counts per feature and class: reads, and misses of each policy."""
    reads: dict[str, list[int]]
    misses: dict[str, dict[str, list[int]]]   # policy -> feature -> per class
    totals: dict[str, int]                    # policy -> decode-critical misses
    headline: dict[str, int]                  # policy -> misses on first heavy-hitter reads of prefix blocks
    n_reads: int


def count(features: np.ndarray, masks: dict[str, np.ndarray]) -> SeedCounts:
    """Reads and misses per class of every feature."""
    reads: dict[str, list[int]] = {}
    misses: dict[str, dict[str, list[int]]] = {p: {} for p in masks}
    for j, (name, labels) in enumerate(FEATURES.items()):
        col = features[:, j]
        reads[name] = [int((col == v).sum()) for v in range(len(labels))]
        for p, m in masks.items():
            misses[p][name] = [int(m[col == v].sum()) for v in range(len(labels))]
    first = ((features[:, 1] == FEATURES["block"].index(HEADLINE[0]))
             & (features[:, 0] == FEATURES["role"].index(HEADLINE[1]))
             & (features[:, 2] == FEATURES["hh_reads_before"].index(HEADLINE[2])))
    return SeedCounts(reads, misses, {p: int(m.sum()) for p, m in masks.items()},
                      {p: int(m[first].sum()) for p, m in masks.items()}, int(features.shape[0]))
