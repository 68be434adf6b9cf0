"""ARC (Megiddo and Modha, FAST'03) on a plain block sequence, as libCacheSim implements it
(libCacheSim/cache/eviction/ARC.c, 1a1a11a/libCacheSim): T1/T2 hold blocks seen once/more than once, B1/B2 their
ghosts; a ghost hit adapts the target size `p` of T1 and brings the block into T2. The cases follow ARC.c's
`_ARC_evict_miss_on_all_queues` (the paper's case IV) and `_ARC_replace`, including its tie rule
(|T1| == p evicts from T1 only on a B2 ghost hit)."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np


class _Arc:
    """The four lists as ordered dicts: the last item is the head (most recent), the first the tail."""

    def __init__(self, capacity: int) -> None:
        self.c = capacity
        self.p = 0.0
        self.t1: OrderedDict[int, None] = OrderedDict()
        self.t2: OrderedDict[int, None] = OrderedDict()
        self.b1: OrderedDict[int, None] = OrderedDict()
        self.b2: OrderedDict[int, None] = OrderedDict()

    def replace(self, in_b2: bool) -> None:
        """Evict T1's tail to B1 or T2's tail to B2 (REPLACE)."""
        l1 = len(self.t1)
        if (l1 > 0 and (l1 > self.p or (l1 == self.p and in_b2))) or not self.t2:
            b, _ = self.t1.popitem(last=False)
            self.b1[b] = None
        else:
            b, _ = self.t2.popitem(last=False)
            self.b2[b] = None

    def evict_new(self) -> None:
        """Make room for a block in no list (case IV)."""
        if len(self.t1) + len(self.b1) + 1 > self.c:
            if self.b1:
                self.b1.popitem(last=False)
                self.replace(False)
            else:
                self.t1.popitem(last=False)  # no ghost kept
        else:
            if len(self.t1) + len(self.b1) + len(self.t2) + len(self.b2) >= 2 * self.c and self.b2:
                self.b2.popitem(last=False)
            self.replace(False)

    def get(self, b: int) -> bool:
        if b in self.t1:
            del self.t1[b]
            self.t2[b] = None
            return True
        if b in self.t2:
            self.t2.move_to_end(b)
            return True
        ghost = 0
        if b in self.b1:
            ghost = 1
            self.p = min(self.p + max(len(self.b2) / len(self.b1), 1.0), self.c)
            del self.b1[b]
        elif b in self.b2:
            ghost = 2
            self.p = max(self.p - max(len(self.b1) / len(self.b2), 1.0), 0.0)
            del self.b2[b]
        if self.c <= 0:
            return False
        while len(self.t1) + len(self.t2) + 1 > self.c:
            if ghost:
                self.replace(ghost == 2)
            else:
                self.evict_new()
        (self.t2 if ghost else self.t1)[b] = None
        return False


def hits(seq: np.ndarray, capacity: int) -> int:
    """Requests of `seq` that hit an ARC cache of `capacity` blocks."""
    cache = _Arc(capacity)
    get = cache.get
    return sum(get(b) for b in seq.tolist())
