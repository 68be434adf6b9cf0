"""vLLM v1's prefix cache (automatic prefix caching), as a fast-tier eviction order.

Modelled from vllm-project/vllm:
* vllm/v1/core/single_type_kv_cache_manager.py, `free`: a finished request's blocks are freed "in reverse order so
  that the tail blocks are evicted first" (`reversed(blocks)` when caching is enabled);
* vllm/v1/core/block_pool.py, `free_blocks` / `get_new_blocks`: a block whose reference count drops to 0 is appended
  to the free block queue (vllm/v1/core/kv_cache_utils.py, `FreeKVCacheBlockQueue`), and new blocks are taken from
  its front, evicting the cached content there; a prefix hit (`touch`) takes the block out of the queue again.
So the order is LRU by release time over blocks with no reference, tail first within one request's release.
Blocks still referenced are evicted only after all of those (engine_release.py: the two-tier fallback).
"""
from __future__ import annotations

import numpy as np

from kv_policy.policies import engine_keys
from kv_policy.policies.engine_release import EngineRelease
from kv_policy.trace import Trace


class VllmPrefixCache(EngineRelease):
    """vLLM v1: free-queue order (release time, tail first) over unreferenced blocks."""

    name = "vLLM-prefix"
    engine = "vLLM v1"

    def released_key(self, b: int) -> tuple[float, ...]:
        return (0.0, float(self.release_group[b]), float(-self.release_rank[b]))

    def event_keys(self, trace: Trace) -> np.ndarray:
        return engine_keys.event_keys(trace, engine_keys.RELEASE_ORDER)
