"""IntentAware: the engine's intent classes first, LRU within a class."""
from __future__ import annotations

from kv_policy import codes
from kv_policy.policies.base import STRIDE, Policy


class IntentAware(Policy):
    """Evict by intent class (done < recompute-ok < cold < warm < prefetch-soon < decode-critical),
    LRU within a class; prefetch blocks announced prefetch-soon if a lower-class victim exists."""

    name = "IntentAware"
    uses_hints = True
    prefetch_on_hint = True

    def key(self, b: int, seq: int, step: int, cls: int) -> float:
        return (codes.DONE - cls) * STRIDE + seq
