"""LRU: the baseline every row is compared with."""
from __future__ import annotations

import numpy as np

from kv_policy.policies.base import Policy
from kv_policy.trace import Trace


class LRU(Policy):
    """Evict the least recently allocated/accessed block. Ignores intent hints."""

    name = "LRU"

    def event_keys(self, trace: Trace) -> np.ndarray:
        """The event index: `key` is `seq`."""
        return np.arange(len(trace), dtype=np.float64)
