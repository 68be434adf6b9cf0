"""HotCold: a two-queue split from access history alone."""
from __future__ import annotations

from kv_policy.policies.base import STRIDE, Policy
from kv_policy.trace import Trace


class HotCold(Policy):
    """Two-queue hot/cold split from access history only: a block re-accessed within
    `window` steps is hot; cold blocks are evicted first, LRU within each queue."""

    name = "HotCold"

    def __init__(self, window: int = 32) -> None:
        self.window = window

    def bind(self, trace: Trace) -> None:
        super().bind(trace)
        self.last = [-(1 << 60)] * trace.n_blocks
        self.hot = bytearray(trace.n_blocks)

    def on_access(self, b: int, step: int) -> None:
        self.hot[b] = 1 if step - self.last[b] <= self.window else 0
        self.last[b] = step

    def key(self, b: int, seq: int, step: int, cls: int) -> float:
        return self.hot[b] * STRIDE + seq
