"""PredictiveHotness: next access predicted from each block's inter-access gaps."""
from __future__ import annotations

from kv_policy.policies.base import Policy
from kv_policy.trace import Trace


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
