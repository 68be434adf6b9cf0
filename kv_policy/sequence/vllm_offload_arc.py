"""vLLM's CPU-offload ARC on a plain block sequence: the variant vLLM ships, which is not textbook ARC.

Modelled from vllm-project/vllm, vllm/v1/kv_offload/cpu/policies/arc.py (`ARCCachePolicy`): a request first
`touch`es its block (in T1: promoted to T2; in T2: to T2's MRU end; in ghost list B1: target_t1_size grows by
max(1, |B2|/|B1|), capped at the capacity; in B2: it shrinks by max(1, |B1|/|B2|), floored at 0; the ghost entry
moves to its list's MRU end and stays); a miss then stores the block: `evict` takes T1's LRU block to B1 when
|T1| >= int(target_t1_size), else T2's LRU block to B2, trims each ghost list to the capacity, and `insert` puts
the block in T1 and drops it from both ghost lists. Unlike ARC (arc.py, as libCacheSim runs it), a ghost hit
enters T1, not T2, and the ghost lists are bounded separately. Blocks are ready when touched (the offload has
completed), and none is protected or referenced.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np


class _OffloadArc:
    def __init__(self, capacity: int) -> None:
        self.c = capacity
        self.target = 0.0
        self.t1: OrderedDict[int, None] = OrderedDict()
        self.t2: OrderedDict[int, None] = OrderedDict()
        self.b1: OrderedDict[int, None] = OrderedDict()
        self.b2: OrderedDict[int, None] = OrderedDict()

    def touch(self, b: int) -> None:
        if b in self.t1:
            del self.t1[b]
            self.t2[b] = None
        elif b in self.t2:
            self.t2.move_to_end(b)
        elif b in self.b1:
            self.target = min(self.target + max(1, len(self.b2) / len(self.b1)), self.c)
            self.b1.move_to_end(b)
        elif b in self.b2:
            self.target = max(self.target - max(1, len(self.b1) / len(self.b2)), 0)
            self.b2.move_to_end(b)

    def evict_one(self) -> None:
        if self.t1 and len(self.t1) >= int(self.target):
            k, _ = self.t1.popitem(last=False)
            self.b1[k] = None
        else:
            k, _ = self.t2.popitem(last=False)
            self.b2[k] = None
        for ghost in (self.b1, self.b2):
            for _ in range(len(ghost) - self.c):
                ghost.popitem(last=False)

    def get(self, b: int) -> bool:
        hit = b in self.t1 or b in self.t2
        self.touch(b)
        if hit or self.c <= 0:
            return hit
        if len(self.t1) + len(self.t2) >= self.c:
            self.evict_one()
        self.t1[b] = None
        self.b1.pop(b, None)
        self.b2.pop(b, None)
        return False


def hits(seq: np.ndarray, capacity: int) -> int:
    """Requests of `seq` that hit vLLM's offload ARC of `capacity` blocks."""
    cache = _OffloadArc(capacity)
    get = cache.get
    return sum(get(b) for b in seq.tolist())
