"""SGLang's radix cache with its default LRU eviction, as a fast-tier eviction order.

Modelled from sgl-project/sglang:
* python/sglang/srt/mem_cache/radix_cache.py: `evict` heaps the evictable leaves (no running request holds them:
  lock_ref 0) by the strategy's key and evicts the smallest, pushing a parent that becomes an evictable leaf; a
  prefix match and an insert (a request's finish caches its tokens) set `last_access_time` on every node of the
  path;
* python/sglang/srt/mem_cache/evict_policy.py, `LRUStrategy`: key = `last_access_time`.
In a kvds trace a prefill reads a request's chain in order and the finish releases it, so a block's last access
is its last read or its release, whichever came later; a chain's blocks share that time, and since only leaves are
evictable the deepest goes first (tail first within the run of reads or releases, engine_release.py).
"""
from __future__ import annotations

import numpy as np

from kv_policy.policies import engine_keys
from kv_policy.policies.engine_release import EngineRelease
from kv_policy.trace import Trace


class SglangRadixLRU(EngineRelease):
    """SGLang radix cache, LRU strategy: last access over unreferenced blocks, leaves (chain tails) first."""

    name = "SGLang-radix"
    engine = "SGLang"

    def released_key(self, b: int) -> tuple[float, ...]:
        return (0.0, float(self.touch_group[b]), float(-self.touch_rank[b]))

    def event_keys(self, trace: Trace) -> np.ndarray:
        """A block's last touch is its release whenever it is unreferenced: the same keys as vLLM's order."""
        return engine_keys.event_keys(trace, engine_keys.RELEASE_ORDER)
