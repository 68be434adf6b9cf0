"""LRU: the baseline every row is compared with."""
from __future__ import annotations

from kv_policy.policies.base import Policy


class LRU(Policy):
    """Evict the least recently allocated/accessed block. Ignores intent hints."""

    name = "LRU"
