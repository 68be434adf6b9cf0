"""TensorRT-LLM's KV cache block reuse with retention priorities, as a fast-tier eviction order.

Modelled from NVIDIA/TensorRT-LLM:
* cpp/tensorrt_llm/batch_manager/evictionPolicy.cpp, `LRUEvictionPolicy`: one free queue per retention priority
  (0-100); `getFreeBlock` takes the front of the lowest non-empty queue; `releaseBlock` appends a block whose last
  reference is gone to its priority's queue (the queues hold leaf blocks only) and, when the block carries a
  duration and a priority other than the default, files an expiry; `refresh` moves an expired block to the default
  priority's queue, at its end;
* cpp/include/tensorrt_llm/executor/executor.h, `KvCacheRetentionConfig`: kMinRetentionPriority 0,
  kMaxRetentionPriority 100, kDefaultRetentionPriority 35.
The retention priority of a block is its request's priority (kvds's 0-100 `block_priority`; a shared block keeps
its own), held for `duration_steps` decode steps after its release (0: no duration, held until evicted or reused).
An expiry takes effect at the end of the step it falls in (the simulator re-keys lapsed blocks between steps).
"""
from __future__ import annotations

import heapq

import numpy as np

from kv_policy.policies import engine_keys
from kv_policy.policies.engine_release import EngineRelease
from kv_policy.trace import Trace

DEFAULT_PRIORITY = 35


class TrtllmRetention(EngineRelease):
    """TensorRT-LLM: lowest retention priority first, release order (tail first) within a priority."""

    name = "TRTLLM-retention"
    engine = "TensorRT-LLM"
    def __init__(self, duration_steps: float = 0.0) -> None:
        self.duration = int(duration_steps)
        self.step_keys = self.duration > 0   # expiries re-key blocks between steps

    def bind(self, trace: Trace) -> None:
        super().bind(trace)
        self.retention = list(self.priority)
        self.expiring: list[tuple[int, int, int]] = []   # (expiry step, release group, block)
        self.cur_step = -1

    def on_event(self, i: int, kind: int, b: int, step: int, critical: bool, cls: int) -> None:
        self.cur_step = step
        super().on_event(i, kind, b, step, critical, cls)

    def released(self, b: int, step: int) -> None:
        self.retention[b] = self.priority[b]   # a claim with the request's priority, then the release
        if self.duration and self.retention[b] != DEFAULT_PRIORITY:
            heapq.heappush(self.expiring, (step + self.duration, self.release_group[b], b))

    def stale(self) -> list[int]:
        """Blocks whose retention lapsed by the end of the step: re-filed at the default priority, as released now."""
        out = []
        while self.expiring and self.expiring[0][0] <= self.cur_step:
            _, group, b = heapq.heappop(self.expiring)
            if self.unref[b] and self.release_group[b] == group:  # not reused (or released again) since
                self.retention[b] = DEFAULT_PRIORITY
                self.release_group[b] = self.last_event + 1   # behind every block released so far
                out.append(b)
        return out

    def released_key(self, b: int) -> tuple[float, ...]:
        return (float(self.retention[b]), float(self.release_group[b]), float(-self.release_rank[b]))

    def event_keys(self, trace: Trace) -> np.ndarray:
        """Without a duration the retention is the request's priority for good (with one, `step_keys` keeps the
        Python loop)."""
        return engine_keys.event_keys(trace, engine_keys.RETENTION)
