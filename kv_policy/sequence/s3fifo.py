"""S3-FIFO (Yang et al., SOSP'23) on a plain block sequence, as libCacheSim implements it
(libCacheSim/cache/eviction/S3FIFO.c of 1a1a11a/libCacheSim, the version dated 12/4/24 that the `libcachesim` 0.3.5
wheel bundles; defaults small-size-ratio=0.10, ghost-size-ratio=0.90, move-to-main-threshold=2): a small FIFO admits
new blocks (until the first eviction, a block arriving when the small FIFO is full goes to main instead), a block
leaving it with two or more hits moves to the main FIFO, others leave a ghost entry; a ghost hit is admitted to
main directly. Main reinserts a block with hits (its count capped at 3, minus one) and evicts one without. The small
FIFO's size is floor(0.1 x capacity); a block is not admitted when that is 1 or less (S3FIFO_insert's
`obj_size >= fifo->cache_size`), as in libCacheSim."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

SMALL_RATIO = 0.10
GHOST_RATIO = 0.90
MOVE_TO_MAIN = 2


class _S3Fifo:
    """Queues as ordered dicts (block -> hit count): the first item is the oldest."""

    def __init__(self, capacity: int) -> None:
        self.c = capacity
        self.small_cap = int(capacity * SMALL_RATIO)
        self.main_cap = capacity - self.small_cap
        self.ghost_cap = int(capacity * GHOST_RATIO)
        self.small: OrderedDict[int, int] = OrderedDict()
        self.main: OrderedDict[int, int] = OrderedDict()
        self.ghost: OrderedDict[int, None] = OrderedDict()
        self.has_evicted = False

    def _to_ghost(self, b: int) -> None:
        if self.ghost_cap <= 0 or b in self.ghost:
            return
        while len(self.ghost) + 1 > self.ghost_cap:
            self.ghost.popitem(last=False)
        self.ghost[b] = None

    def _evict_small(self) -> None:
        while self.small:
            b, freq = self.small.popitem(last=False)
            if freq >= MOVE_TO_MAIN:
                self.main[b] = 0
            else:
                self._to_ghost(b)
                return

    def _evict_main(self) -> None:
        while self.main:
            b, freq = self.main.popitem(last=False)
            if freq >= 1:
                self.main[b] = min(freq, 3) - 1
            else:
                return

    def get(self, b: int) -> bool:
        small, main = self.small, self.main
        if b in small:
            small[b] += 1
            return True
        in_ghost = b in self.ghost
        if in_ghost:
            del self.ghost[b]
        if b in main:
            main[b] += 1
            return True
        if self.small_cap < 1:  # S3FIFO_can_insert: nothing fits a small FIFO of size 0
            return False
        while len(small) + len(main) + 1 > self.c:
            self.has_evicted = True
            if len(main) > self.main_cap or not small:
                self._evict_main()
            else:
                self._evict_small()
        if in_ghost:
            main[b] = 0
        elif self.small_cap > 1:
            (main if not self.has_evicted and len(small) >= self.small_cap else small)[b] = 0
        return False


def hits(seq: np.ndarray, capacity: int) -> int:
    """Requests of `seq` that hit an S3-FIFO cache of `capacity` blocks."""
    cache = _S3Fifo(capacity)
    get = cache.get
    return sum(get(b) for b in seq.tolist())
