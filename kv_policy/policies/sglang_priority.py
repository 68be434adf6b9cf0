"""SGLang's radix cache with its `priority` eviction strategy, as a fast-tier eviction order.

Modelled from sgl-project/sglang:
* python/sglang/srt/mem_cache/evict_policy.py, `PriorityStrategy`: key = (`node.priority`, `last_access_time`):
  "lower priority values evicted first, then LRU within same priority";
* python/sglang/srt/mem_cache/radix_cache.py, insert: `node.priority = max(node.priority, priority)` along the
  request's path, so a shared prefix keeps the highest priority of the requests that cached or matched it.
kvds's request priority (0-100, the trace's `block_priority`) is the request priority SGLang is given. A shared
block (no owning request) takes the maximum priority of the requests whose prefill read it (the admitting request:
the owner of the blocks allocated just before the read), starting from its own.
"""
from __future__ import annotations

import numpy as np

from kv_policy import codes
from kv_policy.policies import engine_keys
from kv_policy.policies.sglang_radix import SglangRadixLRU
from kv_policy.trace import Trace


class SglangPriority(SglangRadixLRU):
    """SGLang radix cache, priority strategy: lowest node priority first, then least recent access."""

    name = "SGLang-priority"

    def bind(self, trace: Trace) -> None:
        super().bind(trace)
        self.owner = trace.block_request.tolist()
        self.node_priority = list(self.priority)
        self.admitting = -1   # priority of the request whose prefill runs now

    def on_event(self, i: int, kind: int, b: int, step: int, critical: bool, cls: int) -> None:
        if kind == codes.ALLOC and self.owner[b] >= 0:
            self.admitting = self.priority[b]
        elif kind == codes.ACCESS and not critical and self.admitting > self.node_priority[b]:
            self.node_priority[b] = self.admitting
        super().on_event(i, kind, b, step, critical, cls)

    def released_key(self, b: int) -> tuple[float, ...]:
        return (float(self.node_priority[b]), float(self.touch_group[b]), float(-self.touch_rank[b]))

    def event_keys(self, trace: Trace) -> np.ndarray:
        return engine_keys.event_keys(trace, engine_keys.NODE_PRIORITY)
