"""SGLang's radix cache with its default LRU eviction, as a fast-tier eviction order.

Modelled from sgl-project/sglang:
* python/sglang/srt/mem_cache/radix_cache.py: `evict` heaps the evictable leaves (no running request holds them:
  lock_ref 0) by the strategy's key and evicts the smallest, pushing a parent that becomes an evictable leaf; a
  prefix match and an insert (a request's finish caches its tokens) set `last_access_time` on every node of the
  path;
* python/sglang/srt/mem_cache/evict_policy.py, `LRUStrategy`: key = `last_access_time`.
In a kvds trace a prefill reads a request's chain in order and the finish releases it, so a block's last access
is its last read or its release, whichever came later; a chain's blocks share that time, and since only leaves are
evictable the deepest goes first (tail first within the run of reads or releases, engine_release.py). On kvds's
traces that order equals vLLM's (vllm_prefix.py): a release is an unreferenced block's last touch.
"""
from __future__ import annotations

from kv_policy.policies.vllm_prefix import VllmPrefixCache


class SglangRadixLRU(VllmPrefixCache):
    """SGLang radix cache, LRU strategy: last access over unreferenced blocks, leaves (chain tails) first. A block's
    last touch is its release whenever it is unreferenced, so its keys (and `event_keys`) are vLLM's order's."""

    name = "SGLang-radix"
    engine = "SGLang"

    def released_key(self, b: int) -> tuple[float, ...]:
        return (0.0, float(self.touch_group[b]), float(-self.touch_rank[b]))
