"""Eviction and prefetch policies. Each one turns what it knows about a block into a heap key.

The simulator keeps resident blocks in a min-heap of keys (lazy deletion), so every policy
costs O(log live blocks) per event. Smaller key = evicted first. A key is computed when
a block is allocated, accessed, or (for hint-aware policies) re-classified, and stays
fixed until the next such event: that is what keeps the cost n log n.
"""
from __future__ import annotations

import numpy as np

from harness.errors import UserError
from harness.policy import codes
from harness.policy.trace import Trace


class Policy:
    """Base: LRU behaviour; subclasses override `key` and flags."""

    name = "base"
    uses_hints = False        # re-key blocks on HINT events
    prefetch_on_hint = False  # prefetch a spilled block when it is announced prefetch-soon
    predictive_prefetch = False

    def bind(self, trace: Trace) -> None:
        """Receive per-block attributes before a run (sizes, priorities, deadlines)."""
        self.n_events = max(1, len(trace))

    def on_access(self, b: int, step: int) -> None:
        """Update per-block history on an access (default: none)."""

    def key(self, b: int, seq: int, step: int, cls: int) -> float:
        return seq


class LRU(Policy):
    """Evict the least recently allocated/accessed block. Ignores intent hints."""

    name = "LRU"


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
        return self.hot[b] * self.n_events + seq


class PredictiveHotness(Policy):
    """Predict each block's next access as last access + EMA of its inter-access gap; evict
    the block predicted furthest away, and prefetch spilled blocks predicted within `horizon` steps."""

    name = "PredictiveHotness"
    predictive_prefetch = True

    def __init__(self, alpha: float = 0.5, horizon: int = 1) -> None:
        self.alpha = alpha
        self.horizon = horizon

    def bind(self, trace: Trace) -> None:
        super().bind(trace)
        self.last = [-1] * trace.n_blocks
        self.gap = [0.0] * trace.n_blocks
        self.global_gap = 16.0

    def on_access(self, b: int, step: int) -> None:
        last = self.last[b]
        if last >= 0:
            g = step - last
            self.gap[b] = g if self.gap[b] == 0.0 else self.alpha * g + (1 - self.alpha) * self.gap[b]
            self.global_gap = 0.999 * self.global_gap + 0.001 * g
        self.last[b] = step

    def predicted(self, b: int, step: int) -> float:
        """Predicted step of the next access (blocks without history use the global mean gap)."""
        base = self.last[b] if self.last[b] >= 0 else step
        return base + (self.gap[b] or self.global_gap)

    def key(self, b: int, seq: int, step: int, cls: int) -> float:
        return -self.predicted(b, step)


class IntentAware(Policy):
    """Evict by intent class (done < recompute-ok < cold < warm < prefetch-soon < decode-critical),
    LRU within a class; prefetch blocks announced prefetch-soon if a lower-class victim exists."""

    name = "IntentAware"
    uses_hints = True
    prefetch_on_hint = True

    def key(self, b: int, seq: int, step: int, cls: int) -> float:
        return (codes.DONE - cls) * self.n_events + seq


# DeadlineAware weights (README.md "Policies"): one intent-class step (W_CLASS) outweighs every
# other term together (W_TIGHT + W_PRIO + W_RECENCY = 3.5), so class decides first; within a
# class, deadline tightness, then request priority, then recency order the victims.
W_CLASS = 4.0
W_TIGHT = 2.0
W_PRIO = 1.0
W_RECENCY = 0.5
TIGHT_REF_US = 100_000.0  # a per-token deadline of 100 ms scores tightness 0.5


class DeadlineAware(Policy):
    """Keep-value = W_CLASS*class + W_TIGHT*tightness + W_PRIO*priority + W_RECENCY*recency;
    evict the lowest value, prefetch announced blocks whose value beats the would-be victim."""

    name = "DeadlineAware"
    uses_hints = True
    prefetch_on_hint = True

    def bind(self, trace: Trace) -> None:
        super().bind(trace)
        tight = TIGHT_REF_US / (TIGHT_REF_US + np.maximum(trace.block_deadline_us, 0.0))
        self.static = (W_TIGHT * tight + W_PRIO * trace.block_priority / 100.0).tolist()
        self.class_value = [W_CLASS * (codes.DONE - c) for c in range(codes.DONE + 1)]

    def key(self, b: int, seq: int, step: int, cls: int) -> float:
        return self.class_value[cls] + self.static[b] + W_RECENCY * seq / self.n_events


POLICIES = {p.name: p for p in (LRU, HotCold, PredictiveHotness, IntentAware, DeadlineAware)}


def make_policy(name: str) -> Policy:
    """A fresh policy instance by (case-insensitive) name."""
    for key, cls in POLICIES.items():
        if key.lower() == name.lower():
            return cls()
    raise UserError(f"unknown policy {name!r} (known: {', '.join(POLICIES)})")


def parse_policies(text: str) -> list[str]:
    """'all' or a comma list -> canonical policy names."""
    if text.strip().lower() == "all":
        return list(POLICIES)
    return [make_policy(part.strip()).name for part in text.split(",") if part.strip()]
