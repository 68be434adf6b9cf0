"""LRU on a plain block sequence: a hit moves the block to the head; a miss inserts it there and evicts the tail.

It is also the offload tiers' default: LMCache's `LRUCachePolicy` (lmcache/v1/storage_backend/cache_policy/lru.py,
an OrderedDict moved to its end on a hit and evicted from its front) and vLLM's CPU offload `LRUCachePolicy`
(vllm/v1/kv_offload/cpu/policies/lru.py) keep this order over blocks no transfer holds."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np


def hits(seq: np.ndarray, capacity: int) -> int:
    """Requests of `seq` that hit an LRU cache of `capacity` blocks."""
    cache: OrderedDict[int, None] = OrderedDict()
    n_hit = 0
    for b in seq.tolist():
        if b in cache:
            cache.move_to_end(b)
            n_hit += 1
            continue
        if capacity <= 0:
            continue
        if len(cache) >= capacity:
            cache.popitem(last=False)
        cache[b] = None
    return n_hit
